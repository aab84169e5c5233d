"""harel-store-dynamodb: the DynamoDB ``ExecutionStore`` (sync over boto3, async over aioboto3).

The store classes are imported on first access, so importing the plugin module
(``harel_store_dynamodb._plugin``) never loads boto3 or aioboto3.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harel_store_dynamodb.aio import AsyncDynamoDBStore
    from harel_store_dynamodb.sync import DynamoDBStore

__all__ = ["AsyncDynamoDBStore", "DynamoDBStore"]

_LAZY = {
    "DynamoDBStore": "harel_store_dynamodb.sync",
    "AsyncDynamoDBStore": "harel_store_dynamodb.aio",
}


def __getattr__(name: str) -> Any:
    """Import ``DynamoDBStore`` / ``AsyncDynamoDBStore`` on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harel_store_dynamodb' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
