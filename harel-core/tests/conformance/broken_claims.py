"""Deliberately broken claims: each memory plan below has one classic lease (or enqueue) bug.

:mod:`broken_stores` registers them in ``BROKEN``; ``test_kit_strength_claims`` proves the
kit's ``ClaimTests`` catch each one.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from harel.store.common import WorkRow, import_touches, lease_lost, work_touches
from harel.store.common.commit import PreparedCommit
from harel.store.common.enqueue import PreparedEnqueue
from harel.store.common.records import PreparedImport
from harel.store.contract import FINISHED, Claim
from harel.store.errors import ExecutionActive
from harel.store.memory._plan import (
    OWNED_TABLES,
    AddRelay,
    DeleteOwned,
    DropWork,
    GetExecution,
    GetWork,
    MemoryPlan,
    OutboxRow,
    Plan,
    PutMark,
    PutWork,
    ReadyWork,
    TouchWork,
)


class LeaseIgnored(MemoryPlan):
    """Claims every group with due units, leased or not (the lease is written, never read)."""

    def _claim(self, owner: str, now: float, lease: float, limit: int) -> Plan[list[Claim]]:
        rows: list[WorkRow] = yield ReadyWork(math.inf, limit)
        claims: list[Claim] = yield from self._lease_rows(rows, owner, now, lease, limit)
        return claims


class NoPriority(MemoryPlan):
    """Claims the oldest ready group first, whatever its priority."""

    def _claim(self, owner: str, now: float, lease: float, limit: int) -> Plan[list[Claim]]:
        rows: list[WorkRow] = yield ReadyWork(now, limit)
        flat = sorted(rows, key=lambda row: (row.ready_at, row.key or ""))
        claims: list[Claim] = yield from self._lease_rows(flat, owner, now, lease, limit)
        return claims


class UnboundedClaim(MemoryPlan):
    """Ignores ``limit``: a claim takes every ready group whole."""

    def _claim(self, owner: str, now: float, lease: float, limit: int) -> Plan[list[Claim]]:
        claims: list[Claim] = yield from super()._claim(owner, now, lease, 10**6)
        return claims


class ReleaseForgetsRetry(MemoryPlan):
    """``release`` ignores ``retry_at``."""

    def release(
        self, owner: str, key: str | None, retry_at: float | None, now: float
    ) -> Plan[None]:
        yield from super().release(owner, key, None, now)


class RenewAnyone(MemoryPlan):
    """``renew`` extends the lease whoever asks and however late."""

    def _renew(self, owner: str, key: str | None, now: float, lease: float) -> Plan[float]:
        row: WorkRow | None = yield GetWork(key)
        if row is None:
            raise lease_lost(row, key, owner, now)
        yield PutWork(WorkRow(key, row.priority, now + lease, owner))
        return now + lease


class PurgeKeepsWork(MemoryPlan):
    """``purge`` leaves the execution's work row (and its lease) behind."""

    def _purge(self, execution_id: str, force: bool) -> Plan[bool]:
        row = yield GetExecution(execution_id)
        if row is not None and not force and row.summary.status not in FINISHED:
            raise ExecutionActive(execution_id, row.summary.status.value)
        for table in OWNED_TABLES:
            if table != "work":
                yield DeleteOwned(table, execution_id)
        return row is not None


class CommitBreaksLease(MemoryPlan):
    """A commit that touches a leased group re-dates it as if it were free."""

    def _write_step(
        self, prepared: PreparedCommit, trace_max: int | None, previous: Any
    ) -> Plan[None]:
        yield from super()._write_step(prepared, trace_max, previous)
        for change in work_touches(prepared):
            yield PutWork(WorkRow(change.key, change.priority, change.due))


class NoImportTouches(MemoryPlan):
    """``import_execution`` writes the units but no work rows."""

    def _import(self, prepared: PreparedImport) -> Plan[None]:
        yield from super()._import(prepared)
        for change in import_touches(prepared):
            yield DropWork(change.key)


class EnqueueNoTouch(MemoryPlan):
    """``enqueue`` writes the outbox row but not its target's work row."""

    def _enqueue(self, prepared: PreparedEnqueue) -> Plan[int]:
        emit = prepared.emit
        seq: int = yield AddRelay(OutboxRow(emit.target_id, emit.event_json))
        return seq


class EnqueueBreaksLease(MemoryPlan):
    """``enqueue`` to a leased group re-dates it as if it were free."""

    def _enqueue(self, prepared: PreparedEnqueue) -> Plan[int]:
        seq: int = yield from super()._enqueue(prepared)
        change = prepared.touch
        yield PutWork(WorkRow(change.key, change.priority, change.due))
        return seq


class EnqueueTakesPriority(MemoryPlan):
    """``enqueue`` sets its priority on an existing group (as the target's own commit does)."""

    def _enqueue(self, prepared: PreparedEnqueue) -> Plan[int]:
        seq: int = yield from super()._enqueue(prepared)
        yield TouchWork(dataclasses.replace(prepared.touch, own=True))
        return seq


class EnqueueMarks(MemoryPlan):
    """``enqueue`` also records the event's dedupe mark (so its delivery finds it done)."""

    def _enqueue(self, prepared: PreparedEnqueue) -> Plan[int]:
        seq: int = yield from super()._enqueue(prepared)
        yield PutMark(prepared.target_id, prepared.emit.event_id, prepared.enqueued_at)
        return seq


class RemarkAccepted(MemoryPlan):
    """The commit ignores an already-recorded event id (re-marks it and writes the step)."""

    def _commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        yield from super()._commit(prepared._replace(processed_event_id=None), trace_max)
        if prepared.processed_event_id is not None:
            yield PutMark(prepared.execution_id, prepared.processed_event_id, 0.0)


class FenceIgnored(MemoryPlan):
    """The commit checks the version alone (a stored copy overwrites a re-created record)."""

    def _commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        yield from super()._commit(prepared._replace(base=None), trace_max)


class StaleRedeliveryConflicts(MemoryPlan):
    """The mark is checked only once the version matches: a redelivery on a stale copy is a
    plain ``StoreConflict`` (the runner reloads and re-drives instead of dropping it)."""

    def _commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        row = yield GetExecution(prepared.execution_id)
        if row is not None and row.version != prepared.expected_version:
            yield from super()._commit(prepared._replace(processed_event_id=None), trace_max)
            return
        yield from super()._commit(prepared, trace_max)


CLAIM_PLANS: dict[str, type[MemoryPlan]] = {
    "lease_ignored": LeaseIgnored,
    "no_priority": NoPriority,
    "unbounded_claim": UnboundedClaim,
    "release_forgets_retry": ReleaseForgetsRetry,
    "renew_anyone": RenewAnyone,
    "purge_keeps_work": PurgeKeepsWork,
    "commit_breaks_lease": CommitBreaksLease,
    "no_import_touches": NoImportTouches,
    "enqueue_no_touch": EnqueueNoTouch,
    "enqueue_breaks_lease": EnqueueBreaksLease,
    "enqueue_takes_priority": EnqueueTakesPriority,
    "enqueue_marks": EnqueueMarks,
    "remark_accepted": RemarkAccepted,
    "fence_ignored": FenceIgnored,
    "stale_redelivery_conflicts": StaleRedeliveryConflicts,
}
"""The claim bugs, by name (``BrokenHarness.named(name)``)."""
