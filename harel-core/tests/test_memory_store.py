"""The memory store's rules, one at a time: what each operation decides, and that a refused
operation has written nothing (the rules themselves are the shared ones of harel.store.common)."""

from __future__ import annotations

from typing import Any

import pytest
from harel.model import Event, Execution, ExecutionSummary, Status
from harel.store import TimerOp
from harel.store.common.claims import relay_due
from harel.store.common.commit import committing
from harel.store.contract import ExecutionRecord, OutboxEntry
from harel.store.errors import (
    AlreadyProcessed,
    ExecutionActive,
    ExecutionAlreadyExists,
    StoreConflict,
)
from harel.store.memory import DictStore
from harel.store.memory._tables import StoredExecution, stored_execution
from harel.store.memory.testing import footprint


def _event() -> Event:
    return Event(id="e-1", kind="Go")


def _row(version: int, receipts: tuple[str | None, ...]) -> StoredExecution:
    summary = ExecutionSummary(id="x", definition_id="d", status=Status.DONE, version=version)
    return StoredExecution(version, "{}", summary, receipts)


def test_commit_writes_every_effect_in_one_step() -> None:
    store = DictStore(trace_max=5)
    exe = Execution(id="x", definition_id="d")
    with committing(exe, [(None, _event())], "in-1", (), (), {"event_kind": "Go"}) as prepared:
        store._commit(prepared)
    row = store.data.executions["x"]
    assert row.version == 1 and row.summary.updated_at == prepared.committed_at
    assert row.receipt(1) == prepared.token
    assert [e.target_id for e in store.pending_outbox()] == [None]
    assert store.data.processed == {"x": {"in-1": prepared.committed_at}}
    assert [step["index"] for step in store.read_trace("x")] == [0]
    work = store.data.work[None]  # the untargeted emit's work row, in the same step
    assert work.ready_at == relay_due(prepared.committed_at) and work.owner is None


def test_a_conflict_or_a_recorded_event_id_is_refused_with_nothing_written() -> None:
    store = DictStore()
    exe = Execution(id="x", definition_id="d")
    store.commit(exe, [], "in-1", [TimerOp.schedule("T", 5.0)])
    before = footprint(store.data, "x")
    stale = Execution(id="x", definition_id="d", version=0)
    with pytest.raises(StoreConflict):
        store.commit(stale, [("x", _event())], None, [TimerOp.schedule("U", 1.0)])
    assert stale.version == 0
    with pytest.raises(AlreadyProcessed):
        store.commit(exe, [("x", _event())], "in-1")
    assert exe.version == 1
    assert footprint(store.data, "x") == before and store.pending_outbox() == []


def test_purge_refuses_an_unfinished_execution_before_deleting() -> None:
    store = DictStore()
    exe = Execution(id="x", definition_id="d", status=Status.RUNNING)
    store.commit(exe, [("x", _event())], "in-1", [TimerOp.schedule("T", 5.0)], [], {"s": 1})
    before = footprint(store.data, "x")
    with pytest.raises(ExecutionActive):
        store.purge("x")
    assert footprint(store.data, "x") == before
    assert store.purge("x", force=True) is True
    assert footprint(store.data, "x") == [] and store.purge("x") is False


class _CountingBatches(DictStore):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[tuple[int, int]] = []

    def _prune_batch(self, before: float, size: int) -> tuple[int, int]:
        self.batches.append(super()._prune_batch(before, size))
        return self.batches[-1]


def test_prune_runs_short_batches_until_one_comes_back_short() -> None:
    store = _CountingBatches()
    for n in range(5):
        store._put_mark("x", f"in-{n}", float(n))
    store._put_mark("x", "young", 100.0)
    assert store.prune_processed(100.0, batch_size=2) == 5
    assert store.batches == [(2, 2), (2, 2), (1, 1)]
    assert store.data.processed == {"x": {"young": 100.0}}


@pytest.mark.parametrize(("older_than", "batch_size"), [(float("nan"), 1), (1.0, 0), ("1", 1)])
def test_prune_arguments_fail_before_anything_is_dropped(older_than: Any, batch_size: Any) -> None:
    store = DictStore()
    store._put_mark("x", "in-1", 0.0)
    with pytest.raises((TypeError, ValueError)):
        store.prune_processed(older_than, batch_size=batch_size)
    assert store.data.processed == {"x": {"in-1": 0.0}}


def _record(with_execution: bool) -> ExecutionRecord:
    return ExecutionRecord(
        execution_id="x",
        execution=Execution(id="x", definition_id="d", version=3) if with_execution else None,
        updated_at=12.5 if with_execution else None,
        processed=(("in-1", 11.0),) if with_execution else (),
        outbox=(OutboxEntry(9, "x", _event()),),
    )


def test_import_keeps_the_records_version_and_times_and_refuses_a_stored_execution() -> None:
    store = DictStore()
    store.import_execution(_record(True))
    row = store.data.executions["x"]
    assert (row.version, row.summary.updated_at) == (3, 12.5)
    assert store.data.processed == {"x": {"in-1": 11.0}} and "x" in store.data.work
    before = footprint(store.data, "x")
    with pytest.raises(ExecutionAlreadyExists):
        store.import_execution(_record(True))
    assert footprint(store.data, "x") == before


def test_import_of_relays_alone_appends_them_and_their_work_row() -> None:
    store = DictStore()
    store.import_execution(_record(False))
    assert "x" not in store.data.executions and "x" in store.data.work
    assert [entry.target_id for entry in store.pending_outbox()] == ["x"]
    exported = store.export_execution("x")
    assert exported is not None and exported.execution is None
    assert DictStore().export_execution("x") is None


def test_commit_records_its_receipt_in_the_ring_carried_over() -> None:
    exe = Execution(id="x", definition_id="d", version=9)
    with committing(exe, []) as prepared:
        row = stored_execution(prepared, _row(9, ("t8", "t9", *[None] * 6)))
    assert row.receipts == ("t8", "t9", prepared.token, *[None] * 5)  # slot 10 % 8
    assert row.receipt(10) == prepared.token and row.receipt(9) == "t9"


@pytest.mark.parametrize(("found", "resent"), [(5, True), (12, True), (13, False), (3, False)])
def test_a_missed_cas_is_a_resend_only_while_the_ring_holds_its_receipt(
    found: int, resent: bool
) -> None:
    exe = Execution(id="x", definition_id="d", version=4)
    with committing(exe, []) as prepared:
        ring = [f"other-{slot}" for slot in range(8)]
        ring[5] = prepared.token if found < 13 else "version-13"  # version 5 is slot 5
        row = _row(found, tuple(ring))
        if resent:
            assert DictStore()._cas(prepared, row) is False  # success, nothing written
        else:
            with pytest.raises(StoreConflict):
                DictStore()._cas(prepared, row)
