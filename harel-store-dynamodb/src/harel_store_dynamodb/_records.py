"""``export_execution`` / ``import_execution``: one execution's items out and in.

Export.  A strongly consistent ``Query`` of the execution's partition (the execution item, its
trace steps, dedupe marks and timers), then the relay index for the pending outbox entries
targeted at the id and the spawn intents it wrote, then one consistent read of the execution
item: if its version or trace cursor moved meanwhile (a commit or ``append_trace`` landed), the
export starts over, so the record is the state at one version.  (Relay entries are found
through the relay index, which DynamoDB keeps eventually consistent; an entry acked meanwhile
may still show.)  Items of an id whose execution item is absent are leftovers of an import
that crashed before its commit point and are not exported.

Import.  The execution item is ``Put`` under ``attribute_not_exists`` in ONE
``TransactWriteItems`` with its timers, its relay entries (new seqs in record order, packed like
a big commit's when they exceed the action budget) and as many marks and trace steps as fit in
100 actions / 4 MB: a refused condition is :class:`ExecutionAlreadyExists` with nothing written.
A record too big for one transaction writes its remaining marks and trace steps first (after a
consistent check that the execution is absent), and the transaction with the execution item
last, as the commit point: a crash in between leaves only items nothing reaches (trace steps
beyond the absent cursor; marks of an absent execution, which ``load_for_event`` ignores), and
a rerun overwrites them.  Two importers racing on one big record both pass the check; one wins
the transaction, and the side items each wrote are those of the same record when they import
the same export (what ``harel migrate`` does).
"""

from __future__ import annotations

from typing import Any

from harel.store.author import PreparedCommit, PreparedImport, import_touches
from harel.store.contract import ExecutionRecord, OutboxEntry, SpawnEntry, TimerOp
from harel.store.errors import ExecutionAlreadyExists, PayloadTooLarge, StoreUnavailable

from harel_store_dynamodb import _support as support
from harel_store_dynamodb._commit import (
    MAX_ACTIONS,
    TRANSACTION_BUDGET,
    guarded_put,
    relay_items,
)
from harel_store_dynamodb._commit_plan import landed, new_token
from harel_store_dynamodb._cursor import NEW_EXECUTION, TraceCursor, cursor_of
from harel_store_dynamodb._items import (
    Action,
    execution_update,
    mark_item,
    read_execution,
    read_outbox_entry,
    read_relay_entries,
    read_spawn_entry,
    read_steps,
    step_item,
    timer_item,
)
from harel_store_dynamodb._requests import Call, RequestInDoubt, TransactionCancelled
from harel_store_dynamodb._schema import EXE_SK, G1S, SK, exe_key, exe_pk, shard_of
from harel_store_dynamodb._seq import BaseClock
from harel_store_dynamodb._support import (
    ATTEMPTS,
    Plan,
    backoff,
    query_all,
    targeted_relay_items,
    written_spawn_items,
)
from harel_store_dynamodb._values import (
    Expr,
    Item,
    as_str,
    exact_float,
    float_from_key,
    item_size,
)
from harel_store_dynamodb._work import WorkHints, bundle_items, split_touches, touch_action

# -- export --------------------------------------------------------------------------------


def export_execution(table: str, execution_id: str, shards: int = 1) -> Plan:
    """Everything stored for ``execution_id`` at one version (module doc), or ``None``."""
    for _ in range(ATTEMPTS):
        e = Expr()
        items = yield from query_all(
            {
                "TableName": table,
                "KeyConditionExpression": f"{e.name('pk')} = {e.value(exe_pk(execution_id))}",
                "ConsistentRead": True,
                **e.args(),
            }
        )
        outbox = yield from _targeted(table, execution_id, shards)
        spawns = yield from _written(table, execution_id, shards)
        head = next((item for item in items if item[SK]["S"] == EXE_SK), None)
        if head is None:
            if not outbox:
                return None
            return ExecutionRecord(execution_id=execution_id, execution=None, outbox=tuple(outbox))
        reply = yield Call(
            "get_item", {"TableName": table, "Key": exe_key(execution_id), "ConsistentRead": True}
        )
        again = reply.get("Item")
        what = f"execution {execution_id!r}"
        if again is not None and cursor_of(again, what) == cursor_of(head, what):
            return _record(execution_id, items, head, outbox, spawns)
    raise StoreUnavailable(
        f"export of {execution_id!r} kept racing commits on it; retry when it is quieter"
    )


def _record(
    execution_id: str,
    items: list[Item],
    head: Item,
    outbox: list[OutboxEntry],
    spawns: list[SpawnEntry],
) -> ExecutionRecord:
    what = f"execution {execution_id!r}"
    steps = [item for item in items if item[SK]["S"].startswith(EXE_SK + ":")]
    marks = sorted(
        (as_str(item, "ev", f"a mark of {what}"), float_from_key(item[G1S]["S"], what))
        for item in items
        if item[SK]["S"][:2] in ("p:", "P:")
    )
    timers = sorted(
        (as_str(item, "ph", f"a timer of {what}"), exact_float(as_str(item, "fa", what), what))
        for item in items
        if item[SK]["S"][:2] in ("t:", "T:")
    )
    return ExecutionRecord(
        execution_id=execution_id,
        execution=read_execution(head),
        updated_at=exact_float(as_str(head, "ua", what), what),
        processed=tuple(marks),
        timers=tuple(timers),
        outbox=tuple(outbox),
        spawns=tuple(spawns),
        trace=tuple(read_steps(execution_id, [head, *steps])),
    )


def _targeted(table: str, execution_id: str, shards: int) -> Plan:
    """The pending outbox entries targeted at ``execution_id`` (written by anyone: every
    shard)."""
    found: list[OutboxEntry] = []
    for item in (yield from targeted_relay_items(table, execution_id, shards)):
        for seq, _slot, entry in read_relay_entries(item):
            outbox_entry = read_outbox_entry(seq, entry)
            if outbox_entry.target_id == execution_id:
                found.append(outbox_entry)
    return sorted(found, key=lambda entry: entry.seq)


def _written(table: str, execution_id: str, shards: int) -> Plan:
    """The pending spawn intents ``execution_id`` wrote (its own shard)."""
    found = [
        read_spawn_entry(seq, execution_id, entry)
        for item in (yield from written_spawn_items(table, execution_id, shards))
        for seq, _slot, entry in read_relay_entries(item)
    ]
    return sorted(found, key=lambda entry: entry.seq)


# -- import --------------------------------------------------------------------------------


def _as_commit(prepared: PreparedImport) -> PreparedCommit:
    """The import as an inserting commit (its execution item and relay items are a commit's)."""
    exe = prepared.execution
    return PreparedCommit(
        execution_id=prepared.execution_id,
        expected_version=0,
        new_version=0 if exe is None else exe.version,
        definition_id="" if exe is None else exe.definition_id,
        status="" if exe is None else exe.status,
        outcome=None if exe is None else exe.outcome,
        active_path=None if exe is None else exe.active_path,
        parent_id=None if exe is None else exe.parent_id,
        document="" if exe is None else exe.document,
        emits=prepared.emits,
        processed_event_id=None,
        timers=(),
        spawns=prepared.spawns,
        trace=None,
        committed_at=0.0 if exe is None else exe.updated_at,
    )


def _side_items(
    table: str, prepared: PreparedImport, shard: int
) -> tuple[list[Action], list[Item]]:
    """The timers (always in the transaction), then the marks and trace steps."""
    execution_id = prepared.execution_id
    timers: list[Action] = [
        {
            "Put": {
                "TableName": table,
                "Item": timer_item(execution_id, TimerOp.schedule(p, at), shard),
            }
        }
        for p, at in prepared.timers
    ]
    rest = [mark_item(execution_id, event_id, at, shard) for event_id, at in prepared.processed]
    rest += [step_item(execution_id, index, text) for index, text in prepared.trace]
    return timers, rest


def _transaction(
    table: str,
    prepared: PreparedImport,
    base: int,
    token: str,
    shards: int = 1,
    work: WorkHints | None = None,
) -> tuple[list[Action], frozenset[int], list[Item], dict[int, str | None]]:
    """The import's transaction, its relay action indexes, the items written before it, and
    its work-row actions by index (the touches of :func:`harel.store.author.import_touches`,
    built from the rows ``work`` last saw)."""
    commit = _as_commit(prepared)
    shard = shard_of(prepared.execution_id, shards)
    actions: list[Action] = []
    if prepared.execution is not None:
        trace = prepared.trace
        cursor = TraceCursor(
            commit.new_version, trace[-1][0] + 1 if trace else 0, trace[0][0] if trace else 0
        )
        update, _size = execution_update(table, commit, token, NEW_EXECUTION, cursor, shard)
        actions.append(update)
    timers, rest = _side_items(table, prepared, shard)
    actions += timers
    hints = work if work is not None else WorkHints()
    work_indexes: dict[int, str | None] = {}
    inline, bundled = split_touches(import_touches(prepared), prepared.execution_id)
    for change in inline:
        action, _after = touch_action(table, change, hints.get(change.key), shards)
        work_indexes[len(actions)] = change.key
        actions.append(action)
    bundles = bundle_items(base, bundled, prepared.priority, prepared.execution_id, shards)
    first_bundle = len(actions)
    actions += [guarded_put(table, item) for item in bundles]
    if len(actions) > MAX_ACTIONS:
        raise PayloadTooLarge(
            f"record {prepared.execution_id!r} arms {len(timers)} timers and targets "
            f"{len(work_indexes)} work rows; one DynamoDB transaction holds at most "
            f"{MAX_ACTIONS} actions"
        )
    relays = relay_items(commit, base, MAX_ACTIONS - len(actions), shard)
    indexes = frozenset(range(first_bundle, len(actions) + len(relays)))
    actions += [guarded_put(table, item) for item in relays]
    if len(actions) > MAX_ACTIONS:
        raise PayloadTooLarge(
            f"record {prepared.execution_id!r} needs {len(actions)} DynamoDB actions for its "
            f"execution, timers and relay entries; one transaction holds at most {MAX_ACTIONS}"
        )
    size = sum(item_size(a.get("Put", {}).get("Item", {})) for a in actions)
    early: list[Item] = []
    for item in rest:
        if len(actions) < MAX_ACTIONS and size + item_size(item) <= TRANSACTION_BUDGET:
            actions.append({"Put": {"TableName": table, "Item": item}})
            size += item_size(item)
        else:
            early.append(item)
    return actions, indexes, early, work_indexes


def import_execution(
    table: str,
    clock: BaseClock,
    prepared: PreparedImport,
    shards: int = 1,
    work: WorkHints | None = None,
) -> Plan:
    """Write ``prepared`` atomically (module doc); ``ExecutionAlreadyExists`` when stored."""
    execution_id = prepared.execution_id
    tokens: list[str] = []
    doubt = False
    checked = False
    hints = work if work is not None else WorkHints()
    for attempt in range(ATTEMPTS):
        token = new_token()
        tokens.append(token)
        actions, relays, early, rows = _transaction(
            table, prepared, clock.next(), token, shards, hints
        )
        if not actions:
            return  # an empty record: nothing to write
        if early and not checked:
            reply = yield Call(
                "get_item",
                {"TableName": table, "Key": exe_key(execution_id), "ConsistentRead": True},
            )
            if reply.get("Item") is not None:
                raise ExecutionAlreadyExists(execution_id)
            yield from _put_all(table, early)
            checked = True
        params: dict[str, Any] = {"TransactItems": actions, "ClientRequestToken": token}
        for resend in range(ATTEMPTS):
            try:
                yield Call("transact_write_items", params)
                for key in rows.values():
                    hints.drop(key)
                return
            except TransactionCancelled as exc:
                codes = exc.codes()
                doubt = doubt or exc.retried
                if prepared.execution is not None and codes[:1] == ["ConditionalCheckFailed"]:
                    old = exc.reasons[0].get("Item")
                    if doubt and old is not None and landed(old, _as_commit(prepared), tokens):
                        return
                    raise ExecutionAlreadyExists(execution_id) from None
                moved = [i for i in rows if codes[i : i + 1] == ["ConditionalCheckFailed"]]
                if moved:
                    for i in moved:  # a work row moved since this store saw it: rebuild
                        hints.seen_item(rows[i], exc.reasons[i].get("Item"))
                    break
                if any(codes[i : i + 1] == ["ConditionalCheckFailed"] for i in relays):
                    if doubt and prepared.execution is None:
                        return  # our own earlier send landed (bases are unique per process)
                    break  # another process drew the same relay base: draw again
                if set(codes) & support.BUSY_CODES:
                    yield backoff(attempt)
                    break
                raise support.cancellation_error(exc, f"the import of {execution_id!r}") from exc
            except StoreUnavailable:
                doubt = True
                yield backoff(resend)
        else:
            raise RequestInDoubt(
                f"the import of {execution_id!r} got no clear answer from DynamoDB; export the "
                "id to see whether it was stored before importing again"
            )
    raise StoreUnavailable(f"the import of {execution_id!r} kept colliding; retry")


def _put_all(table: str, items: list[Item]) -> Plan:
    """``BatchWriteItem`` puts of ``items`` (unprocessed ones retried with backoff)."""
    pending: list[Any] = [{"PutRequest": {"Item": item}} for item in items]
    attempt = 0
    while pending:
        batch, pending = pending[:25], pending[25:]
        reply = yield Call("batch_write_item", {"RequestItems": {table: batch}})
        unprocessed = reply.get("UnprocessedItems", {}).get(table, [])
        if unprocessed:
            attempt += 1
            if attempt > ATTEMPTS * 4:
                raise StoreUnavailable(f"DynamoDB kept throttling writes to {table!r}; retry")
            pending = unprocessed + pending
            yield backoff(attempt)
