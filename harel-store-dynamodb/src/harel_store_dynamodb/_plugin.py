"""Registers the DynamoDB backend with harel's store registry.

Imports no driver (boto3/aioboto3) and no engine: ``harel stores`` lists the backend without
loading them.
"""

from __future__ import annotations

from collections.abc import Callable

from harel.registry import StoreBackend, hookimpl
from harel.store.contract import Capabilities

DISTRIBUTION = "harel-store-dynamodb"

CAPABILITIES = Capabilities(
    persistent=True,
    multi_process=True,
    ordered_listing=True,
    exact_pages=True,
)
"""Managed durable storage, any number of processes (conditional transactions), listing from
an index sorted by id, exact pages (filters are applied server-side, pages refilled)."""


@hookimpl
def harel_register_stores(register: Callable[[StoreBackend], None]) -> None:
    """Register ``dynamodb://`` (sync ``DynamoDBStore``, async ``AsyncDynamoDBStore``)."""
    register(
        StoreBackend(
            name="dynamodb",
            schemes=("dynamodb",),
            store="harel_store_dynamodb.sync:DynamoDBStore",
            async_store="harel_store_dynamodb.aio:AsyncDynamoDBStore",
            capabilities=CAPABILITIES,
            distribution=DISTRIBUTION,
            harness="harel_store_dynamodb.testing:harness_from_url",
            local_url="dynamodb://harel-kit?local=moto",
            exists="harel_store_dynamodb._exists:store_exists",
            legacy_env="harel_store_dynamodb._env:url_from_env",
            legacy_vars=("STM_DYNAMODB_ENDPOINT", "STM_AWS_REGION", "STM_DYNAMODB_TABLE"),
            description="Amazon DynamoDB, one table (boto3; async over aioboto3)",
        )
    )
