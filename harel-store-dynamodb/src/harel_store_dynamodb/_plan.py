"""Every store operation as a sans-IO plan: generators that yield :class:`Call`/:class:`Pause`
and receive the client's reply (or get the mapped error thrown in).

``DynamoDBStore`` and ``AsyncDynamoDBStore`` only execute what these yield, so the two cannot
drift.  Requests per operation (counted by the tests): ``load``, ``load_for_event`` (one
``BatchGetItem``), ``is_processed``, ``read_trace``, ``delete_timer``: 1; ``commit``: 1
``TransactWriteItems`` (+1 consistent read for a traced commit of an execution this store
object has not loaded or committed; +1 ``BatchWriteItem`` after lowering ``trace_max`` trims
more steps than the transaction holds); ``pending_*``/``due_timers``/``list_executions``: 1 GSI
query per index shard and page (fanned out and merged exactly, see :data:`._schema.shard_of`);
``ack_*``: 1 (+1 when the last slot of a packed item goes); ``enqueue``: 1
``TransactWriteItems`` (the relay item and the target's work row, see :mod:`._enqueue`).
``claim``/``renew``/``release``: see :mod:`._claims`.
"""

from __future__ import annotations

import contextlib
from typing import Any

from harel.model import Execution, ExecutionPage, ExecutionSummary
from harel.store.author import (
    MAX_DOCUMENT_BYTES,
    ListingQuery,
    PreparedCommit,
    PreparedEnqueue,
    PreparedImport,
    check_event_ref,
    check_id,
    check_limit,
    check_now,
    check_seq,
    check_timer_ref,
    encode_trace_step,
    page_from_probe,
)
from harel.store.contract import DueTimer, OutboxEntry, SpawnEntry
from harel.store.errors import (
    ExecutionNotFound,
    InvalidCursor,
    InvalidIdentifier,
    StoreUnavailable,
)

from harel_store_dynamodb import _claims
from harel_store_dynamodb._commit import MAX_ACTIONS
from harel_store_dynamodb._commit_plan import CommitPlan, delete_quietly
from harel_store_dynamodb._cursor import CursorCache, cursor_of
from harel_store_dynamodb._enqueue import enqueue
from harel_store_dynamodb._items import (
    Action,
    cursor_update,
    read_execution,
    read_outbox_entry,
    read_relay_entries,
    read_spawn_entry,
    read_steps,
    read_summary,
    read_timer,
    step_item,
    step_key,
)
from harel_store_dynamodb._records import export_execution, import_execution
from harel_store_dynamodb._requests import (
    Call,
    ConditionFailed,
    TransactionCancelled,
)
from harel_store_dynamodb._retention import prune_processed, purge
from harel_store_dynamodb._schema import (
    EXE_SK,
    G1P,
    G1S,
    G2P,
    G2S,
    GSI1,
    GSI2,
    LISTING,
    OUTBOX,
    PK,
    SK,
    SPAWNS,
    TIMERS,
    TRACE_RANGE,
    definition_partition,
    exe_key,
    exe_pk,
    index_partitions,
    mark_key,
    path_is_hashed,
    timer_key,
)
from harel_store_dynamodb._seq import CLOCK, BaseClock, locate, relay_pk
from harel_store_dynamodb._support import (
    ATTEMPTS,
    BUSY_CODES,
    Plan,
    backoff,
    batch_get,
    cancellation_error,
    first_up_to,
    gsi1_query,
    page,
    query_all,
    send_retrying_busy,
)
from harel_store_dynamodb._table import CheckKey, open_table
from harel_store_dynamodb._values import Expr, Item, as_str, float_key, n, opt_str, s
from harel_store_dynamodb._work import WorkHints


class Operations:
    """The plans of one store: table name, trace-cursor hints and the relay clock."""

    max_document_bytes: int = MAX_DOCUMENT_BYTES
    """The codec's per-document limit (items are further bounded by 400 KB once compressed)."""

    def __init__(
        self, table: str, cache: CursorCache | None = None, clock: BaseClock = CLOCK
    ) -> None:
        self.table = table
        self.cache = cache if cache is not None else CursorCache()
        self.clock = clock
        self.work = WorkHints()
        """The work rows this store last saw (commits build their touches from them)."""
        self.shards = 1
        """The table's index shard count (set by :meth:`open` from the meta item)."""

    def open(
        self,
        create_table: bool,
        key: CheckKey,
        requested_shards: int | None = None,
        poll: float = 1.0,
    ) -> Plan:
        """Check the table once per ``key`` per process (see :func:`._table.open_table`) and
        adopt its index shard count."""
        self.shards = yield from open_table(self.table, create_table, key, requested_shards, poll)

    # -- reads -----------------------------------------------------------------------------

    def load(self, execution_id: str) -> Plan:
        """The stored execution (consistent read) or ``None``."""
        execution_id = check_id(execution_id)
        reply = yield Call(
            "get_item",
            {"TableName": self.table, "Key": exe_key(execution_id), "ConsistentRead": True},
        )
        return self._remember(execution_id, reply.get("Item"))

    def _remember(self, execution_id: str, item: Item | None) -> Execution | None:
        if item is None:
            self.cache.drop(execution_id)
            return None
        exe = read_execution(item)
        self.cache.put(execution_id, cursor_of(item, f"execution {execution_id!r}"))
        return exe

    def load_for_event(self, execution_id: str, event_id: str) -> Plan:
        """``(execution, processed?)`` from one consistent ``BatchGetItem``."""
        execution_id, event_id = check_event_ref(execution_id, event_id)
        keys = [exe_key(execution_id), mark_key(execution_id, event_id)]
        found = yield from batch_get(self.table, keys, "load_for_event")
        exe_item = next((i for i in found if i.get(SK, {}).get("S") == EXE_SK), None)
        mark = next((i for i in found if i.get(SK, {}).get("S") != EXE_SK), None)
        exe = self._remember(execution_id, exe_item)
        if exe is None:
            return (None, False)
        return (exe, mark is not None and opt_str(mark, "ev") == event_id)

    def is_processed(self, execution_id: str, event_id: str) -> Plan:
        """Whether the dedupe mark ``(execution_id, event_id)`` exists (consistent read)."""
        execution_id, event_id = check_event_ref(execution_id, event_id)
        e = Expr()
        reply = yield Call(
            "get_item",
            {
                "TableName": self.table,
                "Key": mark_key(execution_id, event_id),
                "ConsistentRead": True,
                "ProjectionExpression": e.name("ev"),
                **e.args(),
            },
        )
        item = reply.get("Item")
        return item is not None and opt_str(item, "ev") == event_id

    def read_trace(self, execution_id: str) -> Plan:
        """The retained steps, oldest first (empty for an unknown execution)."""
        execution_id = check_id(execution_id)
        e = Expr()
        params: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": (
                f"{e.name(PK)} = {e.value(exe_pk(execution_id))} AND {e.name(SK)} "
                f"BETWEEN {e.value(s(TRACE_RANGE[0]))} AND {e.value(s(TRACE_RANGE[1]))}"
            ),
            "ConsistentRead": True,
        }
        params["ProjectionExpression"] = ", ".join(
            e.name(a) for a in (SK, "tn", "tl", "i", "s", "sz")
        )
        params.update(e.args())
        items = yield from query_all(params)
        return read_steps(execution_id, items)

    # -- relays and timers -----------------------------------------------------------------

    def pending(self, kind: str, limit: int | None) -> Plan:
        """Pending outbox entries (``kind`` OUTBOX) or spawn intents (SPAWNS), ascending seq:
        the first ``limit`` of every shard, merged by seq and cut to ``limit`` (exact: an entry
        among the first ``limit`` overall is among the first ``limit`` of its shard)."""
        limit = check_limit(limit)
        out: list[OutboxEntry | SpawnEntry] = []
        for partition in index_partitions(kind, self.shards):
            out.extend((yield from self._pending_shard(kind, partition, limit)))
        if self.shards > 1:
            out.sort(key=lambda entry: entry.seq)
        return out if limit is None else out[:limit]

    def _pending_shard(self, kind: str, partition: str, limit: int | None) -> Plan:
        """The first ``limit`` pending entries of one shard, ascending seq."""
        params = gsi1_query(self.table, partition, limit)
        out: list[OutboxEntry | SpawnEntry] = []
        while True:
            if limit is not None:
                params["Limit"] = page(limit - len(out))
            reply = yield Call("query", params)
            for item in reply.get("Items", []):
                parent = None if kind == OUTBOX else as_str(item, "pa", "a spawn item")
                for seq, _slot, entry in read_relay_entries(item):
                    if parent is None:
                        out.append(read_outbox_entry(seq, entry))
                    else:
                        out.append(read_spawn_entry(seq, parent, entry))
                    if limit is not None and len(out) >= limit:
                        return out
            start = reply.get("LastEvaluatedKey")
            if not start:
                return out
            params = {**params, "ExclusiveStartKey": start}

    def pending_outbox(self, limit: int | None) -> Plan:
        """Undelivered outbox entries, ascending seq (a query of the sparse relay index)."""
        return self.pending(OUTBOX, limit)

    def pending_spawns(self, limit: int | None) -> Plan:
        """Undelivered spawn intents, ascending seq."""
        return self.pending(SPAWNS, limit)

    def ack_outbox(self, seq: object) -> Plan:
        """Remove outbox entry ``seq`` (no-op when unknown)."""
        return self.ack(OUTBOX, seq)

    def ack_spawn(self, seq: object) -> Plan:
        """Remove spawn intent ``seq`` (no-op when unknown)."""
        return self.ack(SPAWNS, seq)

    def ack(self, kind: str, seq: object) -> Plan:
        """Remove relay entry ``seq`` (a no-op when it is not pending)."""
        where = locate(check_seq(seq))
        if where is None:
            return
        letter = "o" if kind == OUTBOX else "s"
        if not where.packed:
            key = {PK: s(relay_pk(where.base)), SK: s(f"{letter}:{where.index:04x}")}
            yield from send_retrying_busy(
                Call("delete_item", {"TableName": self.table, "Key": key})
            )
            return
        key = {PK: s(relay_pk(where.base)), SK: s(f"{letter.upper()}:{where.index:02x}")}
        e = Expr()
        slot, count = f"{e.name('e')}.{e.name(str(where.slot))}", e.name("n")
        try:
            reply = yield from send_retrying_busy(
                Call(
                    "update_item",
                    {
                        "TableName": self.table,
                        "Key": key,
                        "UpdateExpression": (
                            f"REMOVE {slot} SET {count} = {count} - {e.value(n(1))}"
                        ),
                        "ConditionExpression": f"attribute_exists({slot})",
                        "ReturnValues": "UPDATED_NEW",
                        **e.args(),
                    },
                )
            )
        except ConditionFailed:
            return
        if int(reply.get("Attributes", {}).get("n", {}).get("N", "0")) > 0:
            return
        e = Expr()
        with contextlib.suppress(ConditionFailed):  # the last slot is gone: drop the item
            yield from send_retrying_busy(
                Call(
                    "delete_item",
                    {
                        "TableName": self.table,
                        "Key": key,
                        "ConditionExpression": f"{e.name('n')} <= {e.value(n(0))}",
                        **e.args(),
                    },
                )
            )

    def due_timers(self, now: object, limit: int | None) -> Plan:
        """Armed timers with ``fire_at <= now``, ascending ``(fire_at, execution_id, path)``:
        every shard's first ``limit`` (with the ties of its last ``fire_at``), merged and cut
        to ``limit`` (exact, as for :meth:`pending`)."""
        cut = float_key(check_now(now))
        limit = check_limit(limit)
        timers: list[DueTimer] = []
        for partition in index_partitions(TIMERS, self.shards):
            items = yield from first_up_to(self.table, partition, cut, limit)
            timers.extend(read_timer(item) for item in items)
        timers.sort(key=lambda t: (t[2], t[0], t[1]))
        return timers if limit is None else timers[:limit]

    def delete_timer(self, execution_id: str, path: str, fire_at: object) -> Plan:
        """Remove the timer only while it still holds exactly ``fire_at``."""
        execution_id, path, expected = check_timer_ref(execution_id, path, fire_at)
        e = Expr()
        condition = f"{e.name(G1S)} = {e.value(s(float_key(expected)))}"
        if path_is_hashed(path):
            condition += f" AND {e.name('ph')} = {e.value(s(path))}"
        with contextlib.suppress(ConditionFailed):
            yield from send_retrying_busy(
                Call(
                    "delete_item",
                    {
                        "TableName": self.table,
                        "Key": timer_key(execution_id, path),
                        "ConditionExpression": condition,
                        **e.args(),
                    },
                )
            )

    # -- commit ----------------------------------------------------------------------------

    def commit(self, commit: PreparedCommit, trace_max: int | None) -> Plan:
        """Write one prepared commit (see :mod:`._commit_plan`): stored once when it returns,
        not stored when it raises."""
        return CommitPlan(
            self.table, self.cache, self.clock, commit, trace_max, self.shards, self.work
        ).run()

    def enqueue(self, prepared: PreparedEnqueue) -> Plan:
        """Write one outbox entry for ``prepared.target_id`` with its work-row touch in ONE
        ``TransactWriteItems`` and return its seq (see :mod:`._enqueue`)."""
        return enqueue(self.table, self.clock, prepared, self.shards, self.work)

    # -- claims ------------------------------------------------------------------------------

    def claim(self, owner: str, now: float, lease: float, limit: int) -> Plan:
        """Lease up to ``limit`` due units, grouped (see :mod:`._claims`)."""
        return _claims.claim(self.table, self.work, self.shards, owner, now, lease, limit)

    def renew(self, owner: str, key: str | None, now: float, lease: float) -> Plan:
        """Extend ``owner``'s unexpired lease of ``key`` (one ``UpdateItem``)."""
        return _claims.renew(self.table, self.work, owner, key, now, lease)

    def release(self, owner: str, key: str | None, retry_at: float | None, now: float) -> Plan:
        """Give ``owner``'s lease of ``key`` back; the row is re-dated from what is left."""
        return _claims.release(self.table, self.work, self.shards, owner, key, retry_at, now)

    def list_leases(self, now: float, limit: int) -> Plan:
        """The leases held at ``now``, at most ``limit`` (see :mod:`._claims`)."""
        return _claims.leases(self.table, self.shards, now, limit)

    # -- trace outside commits ---------------------------------------------------------------

    def append_trace(self, execution_id: str, entry: dict[str, Any], trace_max: int | None) -> Plan:
        """Append one step to an existing execution's ring (its own transaction)."""
        execution_id = check_id(execution_id)
        text = encode_trace_step(entry)
        cursor = self.cache.get(execution_id)
        for attempt in range(ATTEMPTS):
            if cursor is None:
                e = Expr()
                reply = yield Call(
                    "get_item",
                    {
                        "TableName": self.table,
                        "Key": exe_key(execution_id),
                        "ConsistentRead": True,
                        "ProjectionExpression": ", ".join(e.name(a) for a in ("v", "tn", "tl")),
                        **e.args(),
                    },
                )
                if reply.get("Item") is None:
                    self.cache.drop(execution_id)
                    raise ExecutionNotFound(execution_id)
                cursor = cursor_of(reply["Item"], f"execution {execution_id!r}")
            after = cursor.after_step(trace_max)
            actions: list[Action] = [
                cursor_update(self.table, execution_id, cursor, after),
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": step_item(execution_id, cursor.next_index, text),
                    }
                },
            ]
            trims = [step_key(execution_id, i) for i in range(cursor.low, after.low)]
            room = MAX_ACTIONS - len(actions)
            actions.extend(
                {"Delete": {"TableName": self.table, "Key": k}} for k in trims[-room:] if room
            )
            try:
                yield Call("transact_write_items", {"TransactItems": actions})
            except TransactionCancelled as exc:
                if exc.codes()[0] == "ConditionalCheckFailed":
                    old = exc.reasons[0].get("Item")
                    if old is None:
                        self.cache.drop(execution_id)
                        raise ExecutionNotFound(execution_id) from None
                    cursor = cursor_of(old, f"execution {execution_id!r}")
                    continue
                if set(exc.codes()) & BUSY_CODES and attempt + 1 < ATTEMPTS:
                    yield backoff(attempt)
                    continue
                raise cancellation_error(exc, f"append_trace of {execution_id!r}") from exc
            self.cache.put(execution_id, after)
            yield from delete_quietly(self.table, trims[: max(len(trims) - room, 0)][-500:])
            return
        raise StoreUnavailable(f"append_trace of {execution_id!r} kept racing other writers; retry")

    # -- listing -----------------------------------------------------------------------------

    def list_executions(self, query: ListingQuery) -> Plan:
        """One page ordered by id from a listing index (keyset cursor, exact pages): the first
        ``limit + 1`` matching rows after the cursor of every listing shard (one partition per
        definition with ``definition_id``), merged by id."""
        if query.matches_nothing:
            return ExecutionPage()
        if query.after is not None:
            try:
                check_id(query.after)
            except InvalidIdentifier:
                raise InvalidCursor(
                    "cursor was not produced by list_executions; restart the listing"
                ) from None
        if query.definition_id is not None:
            index, hash_key, range_key = GSI2, G2P, G2S
            partitions = [definition_partition(query.definition_id)]
        else:
            index, hash_key, range_key = GSI1, G1P, G1S
            partitions = index_partitions(LISTING, self.shards)
        rows: list[ExecutionSummary] = []
        for partition in partitions:
            params = self._listing_params(query, index, hash_key, range_key, partition)
            rows.extend((yield from self._listing_shard(query, params)))
        if len(partitions) > 1:
            rows.sort(key=lambda row: row.id)
        return page_from_probe(query, rows[: query.limit + 1])

    def _listing_params(
        self, query: ListingQuery, index: str, hash_key: str, range_key: str, partition: str
    ) -> dict[str, Any]:
        """The ``Query`` of one listing partition after the cursor, with the filters."""
        e = Expr()
        condition = f"{e.name(hash_key)} = {e.value(s(partition))}"
        if query.after is not None:
            condition += f" AND {e.name(range_key)} > {e.value(s(query.after))}"
        filters = []
        if query.definition_id is not None:
            filters.append(f"{e.name('di')} = {e.value(s(query.definition_id))}")
        statuses = query.status_values
        if statuses is not None:
            options = ", ".join(e.value(s(value)) for value in statuses)
            filters.append(f"{e.name('st')} IN ({options})")
        if query.roots_only:
            filters.append(f"attribute_not_exists({e.name('pa')})")
        params: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": index,
            "KeyConditionExpression": condition,
            "Limit": page(query.limit + 1),
        }
        if filters:
            params["FilterExpression"] = " AND ".join(filters)
        params.update(e.args())
        return params

    def _listing_shard(self, query: ListingQuery, params: dict[str, Any]) -> Plan:
        """Up to ``limit + 1`` matching rows of one partition, ascending id (pages refilled)."""
        filtered = "FilterExpression" in params
        rows: list[ExecutionSummary] = []
        while len(rows) <= query.limit:
            reply = yield Call("query", params)
            rows.extend(read_summary(item) for item in reply.get("Items", []))
            start = reply.get("LastEvaluatedKey")
            if not start:
                break
            step = query.limit + 1 - len(rows)
            params = {
                **params,
                "ExclusiveStartKey": start,
                "Limit": page(max(step, 100) if filtered else step),
            }
        return rows[: query.limit + 1]

    # -- records -----------------------------------------------------------------------------

    def export_execution(self, execution_id: str) -> Plan:
        """See :func:`._records.export_execution`."""
        return export_execution(self.table, check_id(execution_id), self.shards)

    def import_execution(self, prepared: PreparedImport) -> Plan:
        """See :func:`._records.import_execution` (the cursor hint is dropped first)."""
        self.cache.drop(prepared.execution_id)
        return import_execution(self.table, self.clock, prepared, self.shards, self.work)

    # -- retention ---------------------------------------------------------------------------

    def purge(self, execution_id: str, force: bool) -> Plan:
        """See :func:`._retention.purge`."""
        return purge(self.table, self.cache, execution_id, force, self.shards)

    def prune_processed(self, older_than: object, batch_size: object) -> Plan:
        """See :func:`._retention.prune_processed`."""
        return prune_processed(self.table, older_than, batch_size, self.shards)


__all__ = ["Operations", "Plan"]
