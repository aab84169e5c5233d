"""What ``RedisStore`` and ``AsyncRedisStore`` share besides their driver: settings, the key
layout, and the plan each contract method runs (so each driver method is one line).  Imports
no driver."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from harel.model import Execution, ExecutionPage, Status
from harel.store.common import PreparedCommit
from harel.store.contract import Capabilities, DueTimer, OutboxEntry, SpawnEntry
from harel.store.errors import StoreError

from harel_store_redis import _plan as plan
from harel_store_redis._capabilities import CAPABILITIES
from harel_store_redis._options import (
    check_client_kwargs,
    check_prefix,
    check_trace_max,
    describe_connection,
)
from harel_store_redis._schema import Keys


class RedisStoreBase:
    """Settings and plan factories of one store over one key prefix."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    trace_max: int | None
    prefix: str
    where: str
    max_payload_bytes: int
    _keys: Keys

    def _configure(
        self,
        connection_kwargs: dict[str, Any],
        *,
        prefix: str,
        trace_max: int | None,
        max_payload_bytes: int,
    ) -> None:
        self.prefix = check_prefix(prefix)
        self.trace_max = check_trace_max(trace_max)
        if (
            isinstance(max_payload_bytes, bool)
            or not isinstance(max_payload_bytes, int)
            or max_payload_bytes < 1
        ):
            raise ValueError(f"max_payload_bytes must be an int >= 1, got {max_payload_bytes!r}")
        self.max_payload_bytes = max_payload_bytes
        self.where = describe_connection(connection_kwargs, prefix)
        check_client_kwargs(connection_kwargs, self.where)
        self._keys = Keys(prefix.encode("utf-8"))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.where})"

    def _closed(self) -> StoreError:
        return StoreError(f"the store over {self.where} is closed; open a new store")

    # -- the plan of each contract method ---------------------------------------------------

    def _open(self) -> plan.Plan[None]:
        return plan.open_plan(self._keys, self.where)

    def _load(self, execution_id: str) -> plan.Plan[Execution | None]:
        return plan.load_plan(self._keys, execution_id)

    def _load_for_event(
        self, execution_id: str, event_id: str
    ) -> plan.Plan[tuple[Execution | None, bool]]:
        return plan.load_for_event_plan(self._keys, execution_id, event_id)

    def _commit(self, prepared: PreparedCommit) -> plan.Plan[None]:
        return plan.commit_plan(
            self._keys, prepared, self.trace_max, where=self.where, limit=self.max_payload_bytes
        )

    def _is_processed(self, execution_id: str, event_id: str) -> plan.Plan[bool]:
        return plan.is_processed_plan(self._keys, execution_id, event_id)

    def _pending_outbox(self, limit: int | None) -> plan.Plan[list[OutboxEntry]]:
        return plan.pending_outbox_plan(self._keys, limit)

    def _pending_spawns(self, limit: int | None) -> plan.Plan[list[SpawnEntry]]:
        return plan.pending_spawns_plan(self._keys, limit)

    def _ack(self, seq: int, *, spawns: bool) -> plan.Plan[None]:
        return plan.ack_plan(self._keys, seq, spawns=spawns, where=self.where)

    def _due_timers(self, now: float, limit: int | None) -> plan.Plan[list[DueTimer]]:
        return plan.due_timers_plan(self._keys, now, limit)

    def _delete_timer(self, execution_id: str, path: str, fire_at: float) -> plan.Plan[None]:
        return plan.delete_timer_plan(self._keys, execution_id, path, fire_at, self.where)

    def _read_trace(self, execution_id: str) -> plan.Plan[list[dict[str, Any]]]:
        return plan.read_trace_plan(self._keys, execution_id)

    def _append_trace(self, execution_id: str, entry: dict[str, Any]) -> plan.Plan[None]:
        return plan.append_trace_plan(self._keys, execution_id, entry, self.trace_max, self.where)

    def _list(
        self,
        status: Iterable[Status] | None,
        definition_id: str | None,
        roots_only: bool,
        limit: int,
        cursor: str | None,
    ) -> plan.Plan[ExecutionPage]:
        return plan.listing_plan(
            self._keys,
            status=status,
            definition_id=definition_id,
            roots_only=roots_only,
            limit=limit,
            cursor=cursor,
        )

    def _purge(self, execution_id: str, force: bool) -> plan.Plan[bool]:
        return plan.purge_plan(self._keys, execution_id, force, self.where)

    def _prune(self, older_than: float, batch_size: int) -> plan.Plan[int]:
        return plan.prune_plan(self._keys, older_than, batch_size, self.where)
