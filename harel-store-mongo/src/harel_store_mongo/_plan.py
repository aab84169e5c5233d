"""``MongoPlan``: the plans of :mod:`harel_store_mongo._operations`,
:mod:`harel_store_mongo._records` and :mod:`harel_store_mongo._claims` under the contract's
method names (:class:`harel.store.common.ContractPlan`), for ``PlanStore`` /
``AsyncPlanStore`` to drive.  Imports no driver."""

from __future__ import annotations

from typing import Any

from harel.model import Execution, ExecutionPage
from harel.store.author import (
    ListingQuery,
    PreparedCommit,
    PreparedEnqueue,
    PreparedImport,
    release_of,
)
from harel.store.contract import Claim, DueTimer, ExecutionRecord, Lease, OutboxEntry, SpawnEntry

from harel_store_mongo import _claims as claims
from harel_store_mongo import _operations as operations
from harel_store_mongo import _records as records
from harel_store_mongo._operations import Plan
from harel_store_mongo._schema import DISTRIBUTION
from harel_store_mongo._seq import HybridClock, SeqSource


class MongoPlan:
    """Every contract operation of one store as a sans-IO plan; ``where`` names the data in
    messages.  Its only state is :attr:`seqs`, the store's writer id and the (process's)
    hybrid clock its seqs come from, which is thread-safe: one instance serves any number of
    calls at once."""

    max_document_bytes: int = operations.MAX_DOCUMENT_BYTES

    def __init__(self, where: str, clock: HybridClock | None = None) -> None:
        self.where = where
        self.seqs = SeqSource(clock)

    def open(self) -> Plan[None]:
        """Check the layout version; create or upgrade the layout when needed."""
        return operations.open_plan(self.where, release_of(DISTRIBUTION))

    def load(self, execution_id: str) -> Plan[Execution | None]:
        """See :func:`harel_store_mongo._operations.load_plan`."""
        return operations.load_plan(execution_id, self.seqs)

    def load_for_event(
        self, execution_id: str, event_id: str
    ) -> Plan[tuple[Execution | None, bool]]:
        """See :func:`harel_store_mongo._operations.load_for_event_plan`."""
        return operations.load_for_event_plan(execution_id, event_id, self.seqs)

    def commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        """See :func:`harel_store_mongo._operations.commit_plan`."""
        return operations.commit_plan(prepared, trace_max, self.where, self.seqs)

    def is_processed(self, execution_id: str, event_id: str) -> Plan[bool]:
        """See :func:`harel_store_mongo._operations.is_processed_plan`."""
        return operations.is_processed_plan(execution_id, event_id)

    def pending_outbox(self, limit: int | None) -> Plan[list[OutboxEntry]]:
        """See :func:`harel_store_mongo._operations.pending_outbox_plan`."""
        return operations.pending_outbox_plan(limit, self.seqs)

    def ack_outbox(self, seq: int) -> Plan[None]:
        """See :func:`harel_store_mongo._operations.ack_plan`."""
        return operations.ack_plan(seq, spawns=False)

    def pending_spawns(self, limit: int | None) -> Plan[list[SpawnEntry]]:
        """See :func:`harel_store_mongo._operations.pending_spawns_plan`."""
        return operations.pending_spawns_plan(limit, self.seqs)

    def ack_spawn(self, seq: int) -> Plan[None]:
        """See :func:`harel_store_mongo._operations.ack_plan`."""
        return operations.ack_plan(seq, spawns=True)

    def due_timers(self, now: float, limit: int | None) -> Plan[list[DueTimer]]:
        """See :func:`harel_store_mongo._operations.due_timers_plan`."""
        return operations.due_timers_plan(now, limit)

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> Plan[None]:
        """See :func:`harel_store_mongo._operations.delete_timer_plan`."""
        return operations.delete_timer_plan(execution_id, path, fire_at)

    def claim(self, owner: str, now: float, lease: float, limit: int) -> Plan[list[Claim]]:
        """See :func:`harel_store_mongo._claims.claim_plan`."""
        return claims.claim_plan(owner, now, lease, limit, self.seqs)

    def renew(self, owner: str, key: str | None, now: float, lease: float) -> Plan[float]:
        """See :func:`harel_store_mongo._claims.renew_plan`."""
        return claims.renew_plan(owner, key, now, lease)

    def release(
        self, owner: str, key: str | None, retry_at: float | None, now: float
    ) -> Plan[None]:
        """See :func:`harel_store_mongo._claims.release_plan`."""
        return claims.release_plan(owner, key, retry_at, now)

    def list_leases(self, now: float, limit: int) -> Plan[list[Lease]]:
        """See :func:`harel_store_mongo._claims.leases_plan`."""
        return claims.leases_plan(now, limit)

    def enqueue(self, prepared: PreparedEnqueue) -> Plan[int]:
        """See :func:`harel_store_mongo._operations.enqueue_plan`."""
        return operations.enqueue_plan(prepared, self.where, self.seqs)

    def read_trace(self, execution_id: str) -> Plan[list[dict[str, Any]]]:
        """See :func:`harel_store_mongo._operations.read_trace_plan`."""
        return operations.read_trace_plan(execution_id)

    def append_trace(
        self, execution_id: str, entry: dict[str, Any], trace_max: int | None
    ) -> Plan[None]:
        """See :func:`harel_store_mongo._operations.append_trace_plan`."""
        return operations.append_trace_plan(execution_id, entry, trace_max)

    def list_executions(self, query: ListingQuery) -> Plan[ExecutionPage]:
        """See :func:`harel_store_mongo._operations.listing_plan`."""
        return operations.listing_plan(query)

    def purge(self, execution_id: str, force: bool) -> Plan[bool]:
        """See :func:`harel_store_mongo._operations.purge_plan`."""
        return operations.purge_plan(execution_id, force)

    def prune_processed(self, older_than: float, batch_size: int) -> Plan[int]:
        """See :func:`harel_store_mongo._operations.prune_plan`."""
        return operations.prune_plan(older_than, batch_size)

    def export_execution(self, execution_id: str) -> Plan[ExecutionRecord | None]:
        """See :func:`harel_store_mongo._records.export_plan`."""
        return records.export_plan(execution_id, self.seqs)

    def import_execution(self, prepared: PreparedImport) -> Plan[None]:
        """See :func:`harel_store_mongo._records.import_plan`."""
        return records.import_plan(prepared, self.where, self.seqs)
