"""``store_exists(url)``: whether a DynamoDB store exists at ``url`` (creates nothing).

The plugin declares it as its ``exists`` hook; harel-core's registry calls it for
``open_store(url, create=False)`` (the CLI's read-only commands): one ``DescribeTable`` of the
URL's table, so ``create_table=true`` creates nothing here.
"""

from __future__ import annotations

from typing import Any

from harel.store.common import connect_with_retry
from harel.store.common.urls import redact_url
from harel.store.errors import InvalidStoreURL

from harel_store_dynamodb._client import endpoint_of
from harel_store_dynamodb._errors import map_error
from harel_store_dynamodb._options import DynamoOptions, from_url_args, make_options
from harel_store_dynamodb._requests import TableNotFound
from harel_store_dynamodb.sync import open_client


def store_exists(url: str, **knobs: Any) -> bool:
    """Whether the table ``url`` names exists (its layout is checked when the store opens).
    Errors: InvalidStoreURL, StoreUnavailable (endpoint unreachable, after the retries),
    StoreConfigError (credentials, region)."""
    table, store_knobs, retry = from_url_args(url, knobs)
    try:
        options = make_options(table, **store_knobs)
    except (TypeError, ValueError) as exc:
        raise InvalidStoreURL(f"{redact_url(url)}: {exc}") from None
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
