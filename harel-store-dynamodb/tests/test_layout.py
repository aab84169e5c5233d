"""Layout versions (issue 11): layout 1 is upgraded in place on open, a newer one is refused.

Layout 1 is built by hand (what release 0.1 wrote: the meta item without ``written_by`` and
the commit token in ``ct``), then a store of this release opens the table.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from harel.model import Event, Execution
from harel.store.common.schema_version import release_of
from harel.store.errors import SchemaVersionError
from harel_store_dynamodb import _table
from harel_store_dynamodb._schema import META_KEY, SCHEMA_VERSION, exe_key
from harel_store_dynamodb.sync import DynamoDBStore, open_client
from harel_store_dynamodb.testing import DynamoDBHarness


@pytest.fixture
def admin(harness: DynamoDBHarness) -> Iterator[Any]:
    client = open_client(harness.options, harness.options.endpoint_url)
    yield client
    client.close()


def reopen(harness: DynamoDBHarness) -> DynamoDBStore:
    """A store as a new process opens it (the per-process layout check forgotten)."""
    _table._CHECKED.clear()
    return harness.open_sync()


def meta(admin: Any, table: str) -> dict[str, Any]:
    item: dict[str, Any] = admin.get_item(TableName=table, Key=META_KEY, ConsistentRead=True)[
        "Item"
    ]
    return item


def as_layout_1(admin: Any, table: str, execution_ids: list[str]) -> None:
    """Rewrite the table as release 0.1 left it: meta 1 without writer, tokens in ``ct``."""
    admin.put_item(TableName=table, Item={**META_KEY, "schema": {"N": "1"}})
    for execution_id in execution_ids:
        item = admin.get_item(TableName=table, Key=exe_key(execution_id), ConsistentRead=True)
        version = int(item["Item"]["v"]["N"])
        receipt = f"k{version % 8}"
        admin.update_item(
            TableName=table,
            Key=exe_key(execution_id),
            UpdateExpression="SET #ct = #k REMOVE #k",
            ExpressionAttributeNames={"#ct": "ct", "#k": receipt},
        )


def test_a_new_table_records_the_layout_and_its_writer(
    harness: DynamoDBHarness, admin: Any
) -> None:
    harness.open_sync().close()
    item = meta(admin, harness.table)
    assert item["schema"] == {"N": str(SCHEMA_VERSION)}
    assert item["written_by"] == {"S": release_of("harel-store-dynamodb")}


def test_layout_1_is_upgraded_in_place_with_its_data_intact(
    harness: DynamoDBHarness, admin: Any
) -> None:
    store = harness.open_sync()
    exe = Execution(id="old-1", definition_id="d", context={"n": 1})
    store.commit(exe, [("old-1", Event(id="e1", kind="Go"))], processed_event_id="in-1")
    store.commit(exe, [])
    before = store.export_execution("old-1")
    store.close()
    as_layout_1(admin, harness.table, ["old-1"])
    token = admin.get_item(TableName=harness.table, Key=exe_key("old-1"))["Item"]["ct"]

    upgraded = reopen(harness)
    try:
        item = meta(admin, harness.table)
        assert item["schema"] == {"N": str(SCHEMA_VERSION)}
        assert item["written_by"] == {"S": release_of("harel-store-dynamodb")}
        stored = admin.get_item(TableName=harness.table, Key=exe_key("old-1"))["Item"]
        assert "ct" not in stored and stored["k2"] == token  # the receipt of version 2
        assert upgraded.export_execution("old-1") == before
        loaded = upgraded.load("old-1")
        assert loaded is not None and loaded.context == {"n": 1}
        upgraded.commit(loaded, [])
        assert loaded.version == 3
    finally:
        upgraded.close()
    reopen(harness).close()  # opening again is a no-op
    assert meta(admin, harness.table)["schema"] == {"N": str(SCHEMA_VERSION)}


def test_several_processes_upgrading_at_once_all_open(harness: DynamoDBHarness, admin: Any) -> None:
    store = harness.open_sync()
    ids = [f"old-{i}" for i in range(6)]
    for execution_id in ids:
        store.commit(Execution(id=execution_id, definition_id="d"), [])
    store.close()
    as_layout_1(admin, harness.table, ids)
    _table._CHECKED.clear()
    barrier = threading.Barrier(3)

    def open_one(_: int) -> str:
        barrier.wait()
        store = DynamoDBStore(harness.table, **harness.store_knobs())
        store.close()
        return "opened"

    with ThreadPoolExecutor(3) as pool:
        assert list(pool.map(open_one, range(3))) == ["opened"] * 3
    assert meta(admin, harness.table)["schema"] == {"N": str(SCHEMA_VERSION)}
    for execution_id in ids:
        stored = admin.get_item(TableName=harness.table, Key=exe_key(execution_id))["Item"]
        assert "ct" not in stored and "k1" in stored


def test_a_newer_layout_is_refused_before_writing(harness: DynamoDBHarness, admin: Any) -> None:
    harness.open_sync().close()
    newer = {
        **META_KEY,
        "schema": {"N": str(SCHEMA_VERSION + 1)},
        "written_by": {"S": "harel-store-dynamodb 9.1.0"},
    }
    admin.put_item(TableName=harness.table, Item=newer)
    with pytest.raises(SchemaVersionError) as info:
        reopen(harness)
    message = str(info.value)
    assert f"layout version {SCHEMA_VERSION + 1}" in message
    assert f"reads version {SCHEMA_VERSION}" in message
    assert "harel-store-dynamodb 9.1.0" in message
    assert "pip install 'harel-store-dynamodb>=9.1.0'" in message
    assert meta(admin, harness.table) == newer
