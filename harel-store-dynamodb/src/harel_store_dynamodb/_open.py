"""Opening a store: find (or create and wait for) the table, check its layout, then settle its
layout version (:mod:`._upgrade`)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from harel.store.errors import StoreConfigError, StoreUnavailable

from harel_store_dynamodb._requests import Call, Pause, TableInUse, TableNotFound
from harel_store_dynamodb._schema import is_active, layout_problems, table_definition
from harel_store_dynamodb._support import Plan
from harel_store_dynamodb._upgrade import check_shards, settle_layout

TABLE_WAIT_SECONDS = 300.0
"""How long a created table may take to become ACTIVE."""
CheckKey = tuple[str, str, str, int | None]
"""What a table check is valid for: ``(table, endpoint, region, id of an injected client)``."""
_CHECKED: dict[CheckKey, int] = {}
"""Tables this process has found ready and laid out for this release, with their index shard
count: keyed by table, endpoint and region (the same name elsewhere is another table) and, for
a client the caller injected, that client (it may reach anything)."""
_CHECKED_LOCK = threading.Lock()


def open_table(
    table: str,
    create_table: bool,
    key: CheckKey,
    requested_shards: int | None = None,
    poll: float = 1.0,
) -> Plan:
    """Find (or create and wait for) the table, check its layout and schema version; the plan
    returns the table's index shard count (recorded in its meta item).

    Done once per ``key`` (:data:`CheckKey`) per process: later stores opened over a table
    this process has checked send nothing (a ``requested_shards`` that differs from the
    table's is still refused, with :class:`~harel.store.errors.StoreConfigError`).
    """
    shards = _CHECKED.get(key)
    if shards is None:
        shards = yield from _check_table(table, create_table, poll, requested_shards)
        with _CHECKED_LOCK:
            _CHECKED[key] = shards
    check_shards(table, requested_shards, shards)
    return shards


def _check_table(table: str, create_table: bool, poll: float, requested: int | None) -> Plan:
    description: dict[str, Any] = {}
    try:
        description = (yield Call("describe_table", {"TableName": table}))["Table"]
    except TableNotFound:
        if not create_table:
            raise StoreConfigError(
                f"DynamoDB table {table!r} does not exist: create it (see the README for the "
                "layout) or open the store with create_table=true"
            ) from None
        with contextlib.suppress(TableInUse):
            yield Call("create_table", table_definition(table))
    waited = 0.0
    while not is_active(description):
        if waited >= TABLE_WAIT_SECONDS:
            raise StoreUnavailable(
                f"DynamoDB table {table!r} is not ACTIVE after {TABLE_WAIT_SECONDS:.0f} s"
            )
        if description:
            yield Pause(poll)
            waited += poll
        try:
            description = (yield Call("describe_table", {"TableName": table}))["Table"]
        except TableNotFound:
            description = {}
            yield Pause(poll)
            waited += poll
    problems = layout_problems(description)
    if problems:
        raise StoreConfigError(
            f"DynamoDB table {table!r} is not laid out for harel: {'; '.join(problems)}; "
            "use another table name (create_table=true creates it)"
        )
    return (yield from settle_layout(table, requested))
