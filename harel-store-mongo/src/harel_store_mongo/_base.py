"""What ``MongoStore`` and ``AsyncMongoStore`` share besides their driver: settings and the plan
each contract method runs (so each driver method is one line).  Imports no driver."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from harel.model import Execution, ExecutionPage, Status
from harel.store.common import PreparedCommit, committing
from harel.store.contract import (
    Capabilities,
    DueTimer,
    Emit,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)
from harel.store.errors import StoreError

from harel_store_mongo import _plan as plan
from harel_store_mongo._capabilities import CAPABILITIES
from harel_store_mongo._options import check_db, check_trace_max


class MongoStoreBase:
    """Settings and plan factories of one store over one database."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    max_document_bytes: ClassVar[int] = plan.MAX_DOCUMENT_BYTES

    trace_max: int | None
    db: str
    where: str

    def _configure(self, *, db: str, trace_max: int | None, where: str) -> None:
        self.db = check_db(db)
        self.trace_max = check_trace_max(trace_max)
        self.where = where

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.where})"

    def _closed(self) -> StoreError:
        return StoreError(f"the store over {self.where} is closed; open a new store")

    def _prepare(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None,
        timers: Sequence[TimerOp],
        spawns: Sequence[Spawn],
        trace: dict[str, Any] | None,
    ) -> AbstractContextManager[PreparedCommit]:
        """The commit envelope with this store's per-commit size limit."""
        return committing(
            exe,
            emits,
            processed_event_id,
            timers,
            spawns,
            trace,
            max_document_bytes=self.max_document_bytes,
        )

    # -- the plan of each contract method ---------------------------------------------------

    def _open(self) -> plan.Plan[None]:
        return plan.open_plan(self.where)

    def _load(self, execution_id: str) -> plan.Plan[Execution | None]:
        return plan.load_plan(execution_id)

    def _load_for_event(
        self, execution_id: str, event_id: str
    ) -> plan.Plan[tuple[Execution | None, bool]]:
        return plan.load_for_event_plan(execution_id, event_id)

    def _commit(self, prepared: PreparedCommit) -> plan.Plan[None]:
        return plan.commit_plan(prepared, self.trace_max, self.where)

    def _is_processed(self, execution_id: str, event_id: str) -> plan.Plan[bool]:
        return plan.is_processed_plan(execution_id, event_id)

    def _pending_outbox(self, limit: int | None) -> plan.Plan[list[OutboxEntry]]:
        return plan.pending_outbox_plan(limit)

    def _pending_spawns(self, limit: int | None) -> plan.Plan[list[SpawnEntry]]:
        return plan.pending_spawns_plan(limit)

    def _ack(self, seq: int, *, spawns: bool) -> plan.Plan[None]:
        return plan.ack_plan(seq, spawns=spawns)

    def _due_timers(self, now: float, limit: int | None) -> plan.Plan[list[DueTimer]]:
        return plan.due_timers_plan(now, limit)

    def _delete_timer(self, execution_id: str, path: str, fire_at: float) -> plan.Plan[None]:
        return plan.delete_timer_plan(execution_id, path, fire_at)

    def _read_trace(self, execution_id: str) -> plan.Plan[list[dict[str, Any]]]:
        return plan.read_trace_plan(execution_id)

    def _append_trace(self, execution_id: str, entry: dict[str, Any]) -> plan.Plan[None]:
        return plan.append_trace_plan(execution_id, entry, self.trace_max)

    def _list(
        self,
        status: Iterable[Status] | None,
        definition_id: str | None,
        roots_only: bool,
        limit: int,
        cursor: str | None,
    ) -> plan.Plan[ExecutionPage]:
        return plan.listing_plan(
            status=status,
            definition_id=definition_id,
            roots_only=roots_only,
            limit=limit,
            cursor=cursor,
        )

    def _purge(self, execution_id: str, force: bool) -> plan.Plan[bool]:
        return plan.purge_plan(execution_id, force)

    def _prune(self, older_than: float, batch_size: int) -> plan.Plan[int]:
        return plan.prune_plan(older_than, batch_size)
