"""Records beyond one transaction: a big import writes its side items first and the execution
item last (the commit point); a crash in between leaves nothing reachable and a rerun finishes.
"""

from __future__ import annotations

from typing import Any

import pytest
from harel.model import Event, Execution
from harel.store.common.records import record_digest
from harel.store.contract import ExecutionRecord, TimerOp
from harel.store.errors import ExecutionAlreadyExists, StoreUnavailable
from harel_store_dynamodb import DynamoDBStore
from harel_store_dynamodb.sync import open_client
from harel_store_dynamodb.testing import DynamoDBHarness

MARKS = 150


def big_record(harness: DynamoDBHarness) -> ExecutionRecord:
    """An execution with 200 trace steps, 150 marks, timers, emits and spawns (exported)."""
    store = harness.open_sync()
    exe = Execution(id="big", definition_id="d", context={"n": 0})
    store.commit(exe, [], trace={"event_kind": "Start"})
    for n in range(1, 200):
        exe.context["n"] = n
        store.commit(
            exe,
            [("big", Event(id=f"out-{n}", kind="Go"))] if n % 50 == 0 else [],
            processed_event_id=f"in-{n}" if n <= MARKS else None,
            timers=(TimerOp.schedule(f"/t{n % 3}", 1000.0 + n),),
            spawns=[(f"child-{n}", "/r", {"n": n})] if n % 40 == 0 else [],
            trace={"event_kind": "Go", "n": n},
        )
    record = store.export_execution("big")
    assert record is not None
    assert (len(record.trace), len(record.processed), len(record.outbox)) == (200, MARKS, 3)
    assert len(record.spawns) == 4 and len(record.timers) == 3
    return record


class Crash(Exception):
    """The importer dies before its commit point."""


class CrashBeforeCommit:
    """A boto3 client that raises instead of sending the first ``TransactWriteItems``."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.crashed = False

    def __getattr__(self, name: str) -> Any:
        if name == "transact_write_items" and not self.crashed:
            self.crashed = True

            def crash(**params: Any) -> Any:
                raise Crash("killed before the commit point")

            return crash
        return getattr(self._client, name)


def test_a_big_record_round_trips_and_a_crashed_import_is_finished_by_a_rerun(
    dynamodb_target: dict[str, Any],
) -> None:
    source, target = DynamoDBHarness(**dynamodb_target), DynamoDBHarness(**dynamodb_target)
    try:
        record = big_record(source)
        raw = open_client(target.options, target.options.endpoint_url)
        crashing = DynamoDBStore(target.table, client=CrashBeforeCommit(raw), create_table=True)
        with pytest.raises(Crash):
            crashing.import_execution(record)
        store = target.open_sync()
        assert target.footprint("big"), "the side items were written first"
        assert store.export_execution("big") is None  # nothing reachable yet
        assert store.load_for_event("big", "in-1") == (None, False)
        assert store.read_trace("big") == [] and store.due_timers(1e9) == []
        assert store.pending_outbox() == [] and store.pending_spawns() == []

        store.import_execution(record)  # the rerun
        again = store.export_execution("big")
        assert again is not None and record_digest(again) == record_digest(record)
        with pytest.raises(ExecutionAlreadyExists):
            store.import_execution(record)
        assert record_digest(store.export_execution("big")) == record_digest(record)  # type: ignore[arg-type]
        loaded = store.load("big")
        assert loaded is not None
        store.commit(loaded, [], trace={"event_kind": "After"})
        assert store.read_trace("big")[-1]["index"] == 200
        raw.close()
    finally:
        source.destroy()
        target.destroy()


def test_an_export_racing_commits_gives_up_typed(harness: DynamoDBHarness) -> None:
    store = harness.open_sync()
    exe = Execution(id="busy", definition_id="d")
    store.commit(exe, [])
    other = harness.open_sync()
    real = other._execute

    def execute(request: Any) -> Any:  # a commit lands between every export's reads
        if getattr(request, "operation", "") == "get_item":
            mine = store.load("busy")
            assert mine is not None
            store.commit(mine, [])
        return real(request)

    other._execute = execute  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable, match="kept racing"):
        other.export_execution("busy")
