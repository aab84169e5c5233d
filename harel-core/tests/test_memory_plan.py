"""The memory backend's sans-IO plan, stepped by hand: no tables, no lock (the template's
``test_plan.py``: what each operation asks for, and what it decides from the answers)."""

from __future__ import annotations

from typing import Any

import pytest
from harel.model import Event, Execution, ExecutionSummary, Status
from harel.store.common import PreparedImport, committing, prepare_import, relay_due
from harel.store.contract import ExecutionRecord, OutboxEntry
from harel.store.errors import (
    AlreadyProcessed,
    ExecutionActive,
    ExecutionAlreadyExists,
    StoreConflict,
)
from harel.store.memory._plan import (
    OWNED_TABLES,
    PLAN,
    AddRelay,
    DeleteOwned,
    DropMarks,
    GetExecution,
    GetForEvent,
    ListOwned,
    OldMarks,
    Plan,
    PutExecution,
    PutMark,
    PutTraceStep,
    ReadTraceRows,
    StoredExecution,
    TouchWork,
    Transaction,
)


def _inner(plan: Plan[Any]) -> Plan[Any]:
    """The nested plan of the one Transaction ``plan`` opens with."""
    request = next(plan)
    assert isinstance(request, Transaction)
    return request.plan


def _row(version: int, status: Status = Status.DONE) -> StoredExecution:
    summary = ExecutionSummary(id="x", definition_id="d", status=status, version=version)
    return StoredExecution(version, "{}", summary)


def test_commit_reads_the_version_then_writes_every_effect() -> None:
    exe = Execution(id="x", definition_id="d")
    with committing(exe, [(None, _event())], "in-1", (), (), {"event_kind": "Go"}) as prepared:
        plan = _inner(PLAN.commit(prepared, 5))
        assert next(plan) == GetForEvent("x", "in-1")  # the row and the dedupe mark, at once
        put = plan.send((None, False))  # no row: an insert
        assert isinstance(put, PutExecution) and put.row.version == 1
        assert put.row.summary.updated_at == prepared.committed_at
        assert isinstance(plan.send(None), AddRelay)
        assert plan.send(None) == PutMark("x", "in-1", prepared.committed_at)
        assert plan.send(None) == ReadTraceRows("x")
        step = plan.send((None, []))
        assert isinstance(step, PutTraceStep) and (step.index, step.keep_from) == (0, -4)
        touch = plan.send(None)  # the untargeted emit's work row, in the same transaction
        assert isinstance(touch, TouchWork) and touch.change.key is None
        assert touch.change.due == relay_due(prepared.committed_at)
        with pytest.raises(StopIteration):
            plan.send(None)


def test_commit_raises_the_conflict_before_any_write() -> None:
    exe = Execution(id="x", definition_id="d", version=1)
    with pytest.raises(StoreConflict), committing(exe, [(None, _event())]) as prepared:
        plan = _inner(PLAN.commit(prepared, None))
        assert next(plan) == GetExecution("x")
        plan.send(_row(3))
    assert exe.version == 1


def test_commit_refuses_a_recorded_event_id_before_any_write() -> None:
    exe = Execution(id="x", definition_id="d", version=3)
    with pytest.raises(AlreadyProcessed), committing(exe, [(None, _event())], "in-1") as prepared:
        plan = _inner(PLAN.commit(prepared, None))
        assert next(plan) == GetForEvent("x", "in-1")
        plan.send((_row(3), True))  # the version matches, the mark is stored: nothing written
    assert exe.version == 3


def test_purge_refuses_an_unfinished_execution_before_deleting() -> None:
    plan = _inner(PLAN.purge("x", False))
    assert next(plan) == GetExecution("x")
    with pytest.raises(ExecutionActive):
        plan.send(_row(2, Status.RUNNING))


@pytest.mark.parametrize(("row", "existed"), [(_row(2), True), (None, False)])
def test_purge_deletes_every_owned_table(row: StoredExecution | None, existed: bool) -> None:
    plan = _inner(PLAN.purge("x", False))
    next(plan)
    deletes = [plan.send(row)]
    with pytest.raises(StopIteration) as done:
        while True:
            deletes.append(plan.send(None))
    assert deletes == [DeleteOwned(table, "x") for table in OWNED_TABLES]
    assert done.value.value is existed


def test_prune_runs_short_batches_until_one_comes_back_short() -> None:
    plan = PLAN.prune_processed(100.0, 2)
    batches = 0
    answers = [[("a", "1"), ("a", "2")], [("b", "1"), ("b", "2")], [("c", "1")]]
    request = next(plan)
    try:
        while True:
            assert isinstance(request, Transaction)
            inner = request.plan
            assert next(inner) == OldMarks(100.0, 2)
            keys = answers[batches]
            drop = inner.send(keys)
            assert drop == DropMarks(tuple(keys))
            with pytest.raises(StopIteration) as batch:
                inner.send(len(keys))
            batches += 1
            request = plan.send(batch.value.value)
    except StopIteration as done:
        assert done.value == 5
    assert batches == 3


@pytest.mark.parametrize(("older_than", "batch_size"), [(float("nan"), 1), (1.0, 0), ("1", 1)])
def test_prune_arguments_fail_before_any_request(older_than: Any, batch_size: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        next(PLAN.prune_processed(older_than, batch_size))


def _event() -> Event:
    return Event(id="e-1", kind="Go")


def _prepared_import(with_execution: bool) -> PreparedImport:
    exe = Execution(id="x", definition_id="d", version=3) if with_execution else None
    outbox = (OutboxEntry(9, "x", _event()),)
    record = ExecutionRecord(
        execution_id="x",
        execution=exe,
        updated_at=12.5 if with_execution else None,
        processed=(("in-1", 11.0),) if with_execution else (),
        outbox=outbox,
    )
    return prepare_import(record, trace_max=None)


def test_import_refuses_a_stored_execution_before_any_write() -> None:
    plan = _inner(PLAN.import_execution(_prepared_import(True)))
    assert next(plan) == GetExecution("x")
    with pytest.raises(ExecutionAlreadyExists):
        plan.send(_row(1))


def test_import_keeps_the_records_version_and_times() -> None:
    plan = _inner(PLAN.import_execution(_prepared_import(True)))
    next(plan)
    put = plan.send(None)
    assert isinstance(put, PutExecution) and put.row.version == 3
    assert put.row.summary.updated_at == 12.5
    assert plan.send(None) == PutMark("x", "in-1", 11.0)
    assert isinstance(plan.send(None), AddRelay)
    touch = plan.send(None)  # the outbox entry's work row, in the same transaction
    assert isinstance(touch, TouchWork) and touch.change.key == "x"
    with pytest.raises(StopIteration):
        plan.send(None)


def test_import_of_relays_alone_reads_nothing_and_appends() -> None:
    plan = _inner(PLAN.import_execution(_prepared_import(False)))
    assert isinstance(next(plan), AddRelay)
    assert isinstance(plan.send(None), TouchWork)
    with pytest.raises(StopIteration):
        plan.send(None)


def test_export_reads_everything_in_one_transaction_and_none_for_nothing() -> None:
    plan = _inner(PLAN.export_execution("x"))
    assert next(plan) == GetExecution("x")
    asked = [plan.send(None)]
    for _ in range(3):
        asked.append(plan.send([]))
    assert asked == [ListOwned(t, "x") for t in ("processed", "timers", "outbox", "spawns")]
    assert plan.send([]) == ReadTraceRows("x")
    with pytest.raises(StopIteration) as done:
        plan.send((None, []))
    assert done.value.value is None


def test_commit_records_its_receipt_in_the_ring_carried_over() -> None:
    exe = Execution(id="x", definition_id="d", version=9)
    with committing(exe, []) as prepared:
        plan = _inner(PLAN.commit(prepared, None))
        next(plan)
        before = StoredExecution(9, "{}", _row(9).summary, ("t8", "t9", *[None] * 6))
        put = plan.send(before)
        assert isinstance(put, PutExecution)
        assert put.row.receipts == ("t8", "t9", prepared.token, *[None] * 5)  # slot 10 % 8
        assert put.row.receipt(10) == prepared.token and put.row.receipt(9) == "t9"


@pytest.mark.parametrize(("found", "resent"), [(5, True), (12, True), (13, False), (3, False)])
def test_a_missed_cas_is_a_resend_only_while_the_ring_holds_its_receipt(
    found: int, resent: bool
) -> None:
    exe = Execution(id="x", definition_id="d", version=4)
    with committing(exe, []) as prepared:
        plan = _inner(PLAN.commit(prepared, None))
        next(plan)
        ring = [f"other-{slot}" for slot in range(8)]
        if found < 13:
            ring[5] = prepared.token  # version 5 (slot 5) written by this commit
        else:
            ring[5] = "version-13"
        row = StoredExecution(found, "{}", _row(found).summary, tuple(ring))
        if resent:
            with pytest.raises(StopIteration):  # success, nothing written
                plan.send(row)
        else:
            with pytest.raises(StoreConflict):
                plan.send(row)
