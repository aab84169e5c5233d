"""Items of the single-table layout: how each record is written and how it is read back.

Driver-free.  Builders return typed items (``{"S": ...}`` values) or transaction actions with
placeholder expressions; decoders turn items back into contract values and raise
:class:`~harel.store.errors.StoreCorrupted` naming the record when they cannot.
"""

from __future__ import annotations

from typing import Any

from harel.model import Execution, ExecutionSummary, Status
from harel.store.author import (
    PreparedCommit,
    PreparedEmit,
    PreparedSpawn,
    decode_event,
    decode_execution,
    decode_trace_step,
    loads,
)
from harel.store.contract import DueTimer, OutboxEntry, SpawnEntry, TimerOp
from harel.store.errors import StoreCorrupted

from harel_store_dynamodb._cursor import TraceCursor
from harel_store_dynamodb._schema import (
    EXE_SK,
    G1P,
    G1S,
    G2P,
    G2S,
    LISTING,
    MARKS,
    PK,
    SK,
    TIMERS,
    definition_partition,
    exe_key,
    exe_pk,
    index_partition,
    mark_key,
    receipt_attribute,
    timer_key,
    trace_sk,
)
from harel_store_dynamodb._seq import seq_key
from harel_store_dynamodb._values import (
    Expr,
    Item,
    as_int,
    as_str,
    check_item,
    exact_float,
    float_key,
    get_blob,
    n,
    opt_str,
    put_blob,
    s,
)

Action = dict[str, Any]
OPTIONAL_SUMMARY = ("oc", "ap", "pa")
FIXED_BY_ID = ("id", G1P, G1S, G2S)
"""Execution-item attributes derived from the execution id alone: written by the insert only."""


# -- the execution item -------------------------------------------------------------------


def execution_attributes(
    commit: PreparedCommit, token: str, shard: int = 0
) -> tuple[Item, list[str]]:
    """The attributes a commit sets on the execution item, and the ones it removes
    (``shard``: the execution's index shard, :func:`._schema.shard_of`)."""
    attrs: Item = {
        "id": s(commit.execution_id),
        "v": n(commit.new_version),
        "di": s(commit.definition_id),
        "st": s(commit.status),
        "ua": s(repr(commit.committed_at)),
        receipt_attribute(commit.new_version): s(token),
        G1P: s(index_partition(LISTING, shard)),
        G1S: s(commit.execution_id),
        G2P: s(definition_partition(commit.definition_id)),
        G2S: s(commit.execution_id),
    }
    used = put_blob(attrs, "d", "dz", commit.document)
    removed = ["dz" if used == "d" else "d"]
    for name, value in zip(
        OPTIONAL_SUMMARY, (commit.outcome, commit.active_path, commit.parent_id), strict=True
    ):
        if value is None:
            removed.append(name)
        else:
            attrs[name] = s(value)
    return attrs, removed


def execution_update(
    table: str,
    commit: PreparedCommit,
    token: str,
    before: TraceCursor | None,
    after: TraceCursor | None,
    shard: int = 0,
) -> tuple[Action, int]:
    """The ``Update`` action of a commit's execution item (with the CAS) and the item's size.

    The condition: an insert applies only where no item is; an update only at
    ``expected_version`` and, when the commit carries a fence (:attr:`PreparedCommit.base`),
    only while the receipt of that version (``k<expected % 8>``: the token that wrote the
    stored version) is the fence.  ``after`` is the trace cursor to store when the commit
    writes a step (then ``before`` is the one it assumed and becomes part of the condition);
    without a step the cursor is left as stored (initialised on insert).  An update leaves out
    what the insert set for good (the attributes derived from the id alone): fewer attributes,
    a cheaper write.
    """
    attrs, removed = execution_attributes(commit, token, shard)
    size = check_item(
        {**exe_key(commit.execution_id), **attrs, "tn": n(0), "tl": n(0)},
        f"execution {commit.execution_id!r}",
    )
    e = Expr()
    unchanged = () if commit.is_insert else FIXED_BY_ID
    sets = [
        f"{e.name(name)} = {e.value(value)}"
        for name, value in attrs.items()
        if name not in unchanged
    ]
    if after is not None:
        sets.append(f"{e.name('tn')} = {e.value(n(after.next_index))}")
        sets.append(f"{e.name('tl')} = {e.value(n(after.low))}")
    elif commit.is_insert:
        zero = e.value(n(0))
        sets.append(f"{e.name('tn')} = {zero}")
        sets.append(f"{e.name('tl')} = {zero}")
    expression = "SET " + ", ".join(sets) + " REMOVE " + ", ".join(e.name(r) for r in removed)
    if commit.is_insert:
        condition = f"attribute_not_exists({e.name(PK)})"
    else:
        condition = f"{e.name('v')} = {e.value(n(commit.expected_version))}"
        if commit.base is not None:
            fence = receipt_attribute(commit.expected_version)
            condition += f" AND {e.name(fence)} = {e.value(s(commit.base))}"
        if before is not None and after is not None:
            condition += f" AND {e.name('tn')} = {e.value(n(before.next_index))}"
            condition += f" AND {e.name('tl')} = {e.value(n(before.low))}"
    action = {
        "Update": {
            "TableName": table,
            "Key": exe_key(commit.execution_id),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **e.args(),
        }
    }
    return action, size


def cursor_update(table: str, execution_id: str, before: TraceCursor, after: TraceCursor) -> Action:
    """``append_trace``'s move of the trace cursor (the execution must exist, cursor unchanged)."""
    e = Expr()
    expression = (
        f"SET {e.name('tn')} = {e.value(n(after.next_index))}, "
        f"{e.name('tl')} = {e.value(n(after.low))}"
    )
    condition = (
        f"attribute_exists({e.name(PK)}) AND {e.name('tn')} = {e.value(n(before.next_index))} "
        f"AND {e.name('tl')} = {e.value(n(before.low))}"
    )
    return {
        "Update": {
            "TableName": table,
            "Key": exe_key(execution_id),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **e.args(),
        }
    }


def read_execution(item: Item) -> Execution:
    """The execution stored in an execution item."""
    what = f"execution item {opt_str(item, 'id')!r}"
    text = get_blob(item, "d", "dz", what)
    try:
        return decode_execution(text)
    except ValueError as exc:
        raise StoreCorrupted(f"{what}: the document cannot be read ({exc})") from None


def read_summary(item: Item) -> ExecutionSummary:
    """The listing summary projected into the listing indexes."""
    what = f"listing entry {opt_str(item, 'id')!r}"
    try:
        return ExecutionSummary(
            id=as_str(item, "id", what),
            definition_id=as_str(item, "di", what),
            status=Status(as_str(item, "st", what)),
            outcome=opt_str(item, "oc"),
            active_path=opt_str(item, "ap"),
            version=as_int(item, "v", what),
            parent_id=opt_str(item, "pa"),
            updated_at=exact_float(as_str(item, "ua", what), what),
        )
    except ValueError as exc:
        raise StoreCorrupted(f"{what} cannot be read ({exc})") from None


# -- marks, timers, trace steps -------------------------------------------------------------


def mark_item(execution_id: str, event_id: str, committed_at: float, shard: int = 0) -> Item:
    """A dedupe mark, aged by its commit time (GSI1 ``P.<shard>`` serves ``prune_processed``)."""
    return {
        **mark_key(execution_id, event_id),
        "ev": s(event_id),
        G1P: s(index_partition(MARKS, shard)),
        G1S: s(float_key(committed_at)),
    }


def timer_item(execution_id: str, op: TimerOp, shard: int = 0) -> Item:
    """An armed timer: ``fa`` keeps the exact ``repr`` of ``fire_at``; GSI1 ``T.<shard>`` sorts
    by it."""
    return {
        **timer_key(execution_id, op.path),
        "xi": s(execution_id),
        "ph": s(op.path),
        "fa": s(repr(op.fire_at)),
        G1P: s(index_partition(TIMERS, shard)),
        G1S: s(float_key(op.fire_at)),
    }


def read_timer(item: Item) -> DueTimer:
    """``(execution_id, path, fire_at)`` of a timer item."""
    what = f"timer item {opt_str(item, 'xi')!r}/{opt_str(item, 'ph')!r}"
    return (
        as_str(item, "xi", what),
        as_str(item, "ph", what),
        exact_float(as_str(item, "fa", what), what),
    )


def step_item(execution_id: str, index: int, text: str) -> Item:
    """Trace step ``index`` (its JSON compressed when long)."""
    item: Item = {PK: exe_pk(execution_id), SK: s(trace_sk(index)), "i": n(index)}
    put_blob(item, "s", "sz", text)
    check_item(item, f"trace step {index} of execution {execution_id!r}")
    return item


def step_key(execution_id: str, index: int) -> Item:
    """The key of trace step ``index``."""
    return {PK: exe_pk(execution_id), SK: s(trace_sk(index))}


def read_steps(execution_id: str, items: list[Item]) -> list[dict[str, Any]]:
    """The visible steps of a ``read_trace`` query (execution item first, then steps)."""
    if not items or items[0].get(SK, {}).get("S") != EXE_SK:
        return []
    what = f"execution {execution_id!r}"
    low, upper = as_int(items[0], "tl", what), as_int(items[0], "tn", what)
    steps = []
    for item in items[1:]:
        index = as_int(item, "i", f"a trace step of {what}")
        if low <= index < upper:
            text = get_blob(item, "s", "sz", f"trace step {index} of {what}")
            try:
                steps.append(decode_trace_step(text, index))
            except ValueError as exc:
                raise StoreCorrupted(
                    f"trace step {index} of {what} cannot be read ({exc})"
                ) from None
    steps.sort(key=lambda step: int(step["index"]))
    return steps


# -- relay entries --------------------------------------------------------------------------


def outbox_entry(seq: int, emit: PreparedEmit) -> dict[str, Any]:
    """One outbox entry as a map value (target, event JSON or its compressed form)."""
    entry: Item = {
        "q": n(seq),
        "t": {"NULL": True} if emit.target_id is None else s(emit.target_id),
    }
    put_blob(entry, "v", "z", emit.event_json)
    return {"M": entry}


def spawn_entry(seq: int, spawn: PreparedSpawn) -> dict[str, Any]:
    """One spawn intent as a map value (child, root path, context JSON)."""
    entry: Item = {"q": n(seq), "c": s(spawn.child_id), "r": s(spawn.root_path)}
    put_blob(entry, "v", "z", spawn.context_json)
    return {"M": entry}


def read_relay_entries(item: Item) -> list[tuple[int, str, Item]]:
    """``(seq, slot, entry)`` of every entry still in a relay item, ascending by seq."""
    entries = []
    for slot, value in item.get("e", {}).get("M", {}).items():
        entry = value.get("M")
        if entry is None:
            raise StoreCorrupted(f"relay item {item.get(G1S, {}).get('S')!r} holds a non-map entry")
        entries.append((as_int(entry, "q", "a relay entry"), slot, entry))
    entries.sort(key=lambda triple: triple[0])
    return entries


def read_outbox_entry(seq: int, entry: Item) -> OutboxEntry:
    """An :class:`OutboxEntry` from its stored map."""
    what = f"outbox entry {seq}"
    target = None if "NULL" in entry.get("t", {"NULL": True}) else as_str(entry, "t", what)
    try:
        return OutboxEntry(seq, target, decode_event(get_blob(entry, "v", "z", what)))
    except ValueError as exc:
        raise StoreCorrupted(f"{what} cannot be read ({exc})") from None


def read_spawn_entry(seq: int, parent_id: str, entry: Item) -> SpawnEntry:
    """A :class:`SpawnEntry` from its stored map."""
    what = f"spawn intent {seq}"
    try:
        context = loads(get_blob(entry, "v", "z", what))
    except ValueError as exc:
        raise StoreCorrupted(f"{what} cannot be read ({exc})") from None
    if not isinstance(context, dict):
        raise StoreCorrupted(f"{what}: the context is not an object")
    return SpawnEntry(seq, parent_id, as_str(entry, "c", what), as_str(entry, "r", what), context)


def relay_label(first_seq: int) -> str:
    """GSI1 sort key of a relay item (its first entry's seq)."""
    return seq_key(first_seq)
