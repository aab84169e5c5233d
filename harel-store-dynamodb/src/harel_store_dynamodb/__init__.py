"""harel-store-dynamodb: the DynamoDB ``ExecutionStore`` (sync over boto3, async over aioboto3).

The store classes are imported on first access, so importing the plugin module
(``harel_store_dynamodb._spec``) never loads boto3 or aioboto3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harel.store.author import lazy_exports

if TYPE_CHECKING:
    from harel_store_dynamodb.aio import AsyncDynamoDBStore
    from harel_store_dynamodb.sync import DynamoDBStore

__all__ = ["AsyncDynamoDBStore", "DynamoDBStore"]

_LAZY = {
    "DynamoDBStore": "harel_store_dynamodb.sync",
    "AsyncDynamoDBStore": "harel_store_dynamodb.aio",
}


__getattr__ = lazy_exports(__name__, _LAZY)
