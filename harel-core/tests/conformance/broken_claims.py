"""Deliberately broken claims: each memory store below has one classic lease (or enqueue) bug.

:mod:`broken_stores` registers them in ``BROKEN``; ``test_kit_strength_claims`` proves the
kit's ``ClaimTests`` catch each one.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from harel.store.common.claims import (
    WorkRow,
    check_release,
    import_touches,
    lease_lost,
    work_touches,
)
from harel.store.common.commit import PreparedCommit
from harel.store.common.enqueue import PreparedEnqueue
from harel.store.common.records import PreparedImport
from harel.store.contract import Claim, Lease
from harel.store.memory import DictStore


class LeaseIgnored(DictStore):
    """Claims every group with due units, leased or not (the lease is written, never read)."""

    def _ready(self, now: float, limit: int) -> list[WorkRow]:
        return super()._ready(math.inf, limit)


class NoPriority(DictStore):
    """Claims the oldest ready group first, whatever its priority."""

    def _ready(self, now: float, limit: int) -> list[WorkRow]:
        rows = super()._ready(now, limit)
        return sorted(rows, key=lambda row: (row.ready_at, row.key or ""))


class UnboundedClaim(DictStore):
    """Ignores ``limit``: a claim takes every ready group whole."""

    def _claim(self, owner: str, now: float, lease: float, limit: int) -> list[Claim]:
        return super()._claim(owner, now, lease, 10**6)


class ReleaseForgetsRetry(DictStore):
    """``release`` ignores ``retry_at``."""

    def release(
        self, owner: str, execution_id: str | None, *, retry_at: float | None = None
    ) -> None:
        check_release(owner, execution_id, retry_at)  # still refuses a bad one
        super().release(owner, execution_id, retry_at=None)


class RenewAnyone(DictStore):
    """``renew`` extends the lease whoever asks and however late."""

    def _renew(self, owner: str, key: str | None, now: float, lease: float) -> float:
        row = self.data.work.get(key)
        if row is None:
            raise lease_lost(row, key, owner, now)
        self._put_work(WorkRow(key, row.priority, now + lease, owner))
        return now + lease


class ListsExpiredLeases(DictStore):
    """``list_leases`` lists every leased row, expired ones too (``now`` is not compared)."""

    def _leases(self, now: float, limit: int) -> list[Lease]:
        return super()._leases(-math.inf, limit)


class PurgeKeepsWork(DictStore):
    """``purge`` leaves the execution's work row (and its lease) behind."""

    def _purge_rows(self, execution_id: str) -> None:
        row = self.data.work.get(execution_id)
        super()._purge_rows(execution_id)
        if row is not None:  # the bug: the work row stays
            self._put_work(row)


class CommitBreaksLease(DictStore):
    """A commit that touches a leased group re-dates it as if it were free."""

    def _write_step(self, prepared: PreparedCommit, previous: Any) -> None:
        super()._write_step(prepared, previous)
        for change in work_touches(prepared):
            self._put_work(WorkRow(change.key, change.priority, change.due))


class NoImportTouches(DictStore):
    """``import_execution`` writes the units but no work rows."""

    def _import(self, prepared: PreparedImport) -> None:
        super()._import(prepared)
        for change in import_touches(prepared):
            self._drop_work(change.key)


class EnqueueNoTouch(DictStore):
    """``enqueue`` writes the outbox row but not its target's work row."""

    def _enqueue(self, prepared: PreparedEnqueue) -> int:
        return self._add_emit(prepared.emit)


class EnqueueBreaksLease(DictStore):
    """``enqueue`` to a leased group re-dates it as if it were free."""

    def _enqueue(self, prepared: PreparedEnqueue) -> int:
        seq = super()._enqueue(prepared)
        change = prepared.touch
        self._put_work(WorkRow(change.key, change.priority, change.due))
        return seq


class EnqueueTakesPriority(DictStore):
    """``enqueue`` sets its priority on an existing group (as the target's own commit does)."""

    def _enqueue(self, prepared: PreparedEnqueue) -> int:
        seq = super()._enqueue(prepared)
        self._touch(dataclasses.replace(prepared.touch, own=True))
        return seq


class EnqueueMarks(DictStore):
    """``enqueue`` also records the event's dedupe mark (so its delivery finds it done)."""

    def _enqueue(self, prepared: PreparedEnqueue) -> int:
        seq = super()._enqueue(prepared)
        self._put_mark(prepared.target_id, prepared.emit.event_id, prepared.enqueued_at)
        return seq


class RemarkAccepted(DictStore):
    """The commit ignores an already-recorded event id (re-marks it and writes the step)."""

    def _commit(self, prepared: PreparedCommit) -> None:
        with self.data.lock:
            super()._commit(prepared._replace(processed_event_id=None))
            if prepared.processed_event_id is not None:
                self._put_mark(prepared.execution_id, prepared.processed_event_id, 0.0)


class FenceIgnored(DictStore):
    """The commit checks the version alone (a stored copy overwrites a re-created record)."""

    def _commit(self, prepared: PreparedCommit) -> None:
        super()._commit(prepared._replace(base=None))


class StaleRedeliveryConflicts(DictStore):
    """The mark is checked only once the version matches: a redelivery on a stale copy is a
    plain ``StoreConflict`` (the runner reloads and re-drives instead of dropping it)."""

    def _commit(self, prepared: PreparedCommit) -> None:
        with self.data.lock:
            row = self.data.executions.get(prepared.execution_id)
            if row is not None and row.version != prepared.expected_version:
                prepared = prepared._replace(processed_event_id=None)
            super()._commit(prepared)


CLAIM_STORES: dict[str, type[DictStore]] = {
    "lease_ignored": LeaseIgnored,
    "no_priority": NoPriority,
    "unbounded_claim": UnboundedClaim,
    "release_forgets_retry": ReleaseForgetsRetry,
    "renew_anyone": RenewAnyone,
    "lists_expired_leases": ListsExpiredLeases,
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
