"""``store_exists(url)``: whether a DynamoDB store exists at ``url`` (creates nothing).

The plugin declares it as its ``exists`` hook; harel-core's registry calls it for
``open_store(url, create=False)`` (the CLI's read-only commands): one ``DescribeTable`` of the
URL's table, so ``create_table=true`` creates nothing here.
"""

from __future__ import annotations

from typing import Any

from harel.store.author import connect_with_retry

from harel_store_dynamodb._client import endpoint_of
from harel_store_dynamodb._errors import map_error
from harel_store_dynamodb._options import DynamoOptions, make_options
from harel_store_dynamodb._requests import TableNotFound
from harel_store_dynamodb._spec import SPEC
from harel_store_dynamodb.sync import open_client


def store_exists(url: str, **knobs: Any) -> bool:
    """Whether the table ``url`` names exists (its layout is checked when the store opens).
    Errors: InvalidStoreURL / InvalidStoreOption, StoreUnavailable (endpoint unreachable,
    after the retries), StoreConfigError (credentials, region)."""
    arguments, retry = SPEC.open_args(url, knobs)
    options = make_options(**arguments)
    return connect_with_retry(lambda: _probe(options), **retry)


def _probe(options: DynamoOptions) -> bool:
    client: Any = open_client(options, endpoint_of(options))
    try:
        client.describe_table(TableName=options.table)
    except Exception as exc:
        mapped = map_error(exc, table=options.table, operation="describe_table")
        if isinstance(mapped, TableNotFound):
            return False
        if mapped is exc:
            raise
        raise mapped from exc
    finally:
        client.close()
    return True
