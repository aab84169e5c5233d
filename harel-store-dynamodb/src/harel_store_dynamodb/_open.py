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
from harel_store_dynamodb._upgrade import settle_layout

TABLE_WAIT_SECONDS = 300.0
"""How long a created table may take to become ACTIVE."""
_CHECKED: set[tuple[str, str]] = set()
"""``(endpoint, table)`` pairs this process has found ready and laid out for this release."""
_CHECKED_LOCK = threading.Lock()


def open_table(table: str, create_table: bool, where: str, poll: float = 1.0) -> Plan:
    """Find (or create and wait for) the table, check its layout and schema version.

    Done once per table and endpoint (``where``) per process: later stores opened over a
    table this process has checked send nothing.
    """
    if (where, table) in _CHECKED:
        return
    yield from _check_table(table, create_table, poll)
    with _CHECKED_LOCK:
        _CHECKED.add((where, table))


def _check_table(table: str, create_table: bool, poll: float) -> Plan:
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
    yield from settle_layout(table)
