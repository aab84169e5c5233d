"""One commit as ONE ``TransactWriteItems``: the CAS'd execution item and every effect (a
commit with no side items is one conditional ``UpdateItem`` instead: same condition, same
attributes, half the write cost and no transaction coordinator).

Action order: ``[0]`` the execution item (``Update`` with the version condition and the fence,
``ALL_OLD`` on failure), then the dedupe mark (``Put`` under ``attribute_not_exists``: an event
id the execution already recorded cancels the whole transaction), the timer ops (collapsed to
the last op per path by the commit envelope, so no item is touched twice), the trace step, the
relay items (each ``Put`` guarded by ``attribute_not_exists``) and the ring trims.

The 100-action cap.  Outbox entries and spawn intents normally get one item each.  When the
commit would need more than 100 actions (a fan-out of 150 spawns), they are *packed*: the
intents (then, if still needed, the outbox entries) of the commit are written as a few items
holding up to 1,024 entries each (at most 350 KB), inside the same transaction, so the
execution's advance and all its effects still land together.  Their ``seq`` says which packed
item and slot they live in; the relay reads them like any other entry and an ack removes its
slot (and the item with its last slot).  Ring trims are the only actions that may overflow: a
trim that does not fit is deleted right after the commit (the step is already hidden by the
stored ``tl``, so readers never see it either way).  Whatever still exceeds 100 actions or
4 MB is refused with :class:`~harel.store.errors.PayloadTooLarge` before anything is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harel.store.author import PreparedCommit, PreparedEmit, WorkTouch
from harel.store.errors import PayloadTooLarge

from harel_store_dynamodb._cursor import TraceCursor
from harel_store_dynamodb._items import (
    Action,
    execution_update,
    mark_item,
    outbox_entry,
    relay_label,
    spawn_entry,
    step_item,
    step_key,
    timer_item,
)
from harel_store_dynamodb._schema import (
    G1P,
    G1S,
    OUTBOX,
    PK,
    SK,
    SPAWNS,
    index_partition,
    shard_of,
    timer_key,
)
from harel_store_dynamodb._seq import (
    CHUNK_SLOTS,
    MAX_CHUNKS,
    MAX_SEQ,
    MAX_UNPACKED,
    packed_seq,
    relay_pk,
    unpacked_seq,
)
from harel_store_dynamodb._values import ITEM_BUDGET, Expr, Item, item_size, s, value_size
from harel_store_dynamodb._work import bundle_items

MAX_ACTIONS = 100
"""DynamoDB's cap on actions per ``TransactWriteItems``."""
TRANSACTION_LIMIT = 4 * 1024 * 1024
TRANSACTION_BUDGET = TRANSACTION_LIMIT - 64 * 1024
CHUNK_BYTES = 350 * 1024
"""A packed relay item is closed once its entries reach this size."""
DEFERRED_TRIMS = 500
"""Trims beyond the transaction are deleted after it, at most this many (the rest stay hidden)."""


@dataclass(frozen=True, slots=True)
class CommitWrite:
    """The request of one commit attempt and what the plan needs around it.

    ``operation`` is ``"update_item"`` for a commit with no side items (one conditional
    ``UpdateItem``, no transaction) and ``"transact_write_items"`` otherwise.  Sending the same
    write again is safe: its condition fails once it (or anything else) landed, and the token's
    receipt on the execution item then tells which.
    """

    operation: str
    params: dict[str, Any]
    relay_actions: frozenset[int]
    """Indexes of the relay ``Put`` actions (a failed condition there is a base collision)."""
    work_actions: dict[int, str | None]
    """Index -> group of the work-row ``Put`` actions (a failed condition: the row moved)."""
    mark_action: int | None
    """Index of the guarded dedupe mark ``Put`` (a failed condition: the mark is stored)."""
    after: TraceCursor | None
    """The trace cursor once applied (``None``: unknown, the commit wrote no step blind)."""
    deferred_trims: tuple[Item, ...]
    token: str


def guarded_put(table: str, item: Item) -> Action:
    e = Expr()
    return {
        "Put": {
            "TableName": table,
            "Item": item,
            "ConditionExpression": f"attribute_not_exists({e.name(PK)})",
            **e.args(),
        }
    }


def _kind(commit: PreparedCommit, kind: str) -> tuple[Sequence[Any], Callable[[int, Any], Any]]:
    if kind == OUTBOX:
        return commit.emits, outbox_entry
    return commit.spawns, spawn_entry


def _relay_item(
    commit: PreparedCommit,
    base: int,
    kind: str,
    sk: str,
    entries: dict[str, Any],
    positions: Sequence[int],
    shard: int,
) -> Item:
    if kind == OUTBOX:
        named = sorted({t for t in (commit.emits[p].target_id for p in positions) if t})
        extra: Item = {"tg": {"SS": named}} if named else {}
    else:
        extra = {"pa": s(commit.execution_id)}
    first = min(int(entry["M"]["q"]["N"]) for entry in entries.values())
    return {
        PK: s(relay_pk(base)),
        SK: s(sk),
        "e": {"M": entries},
        "n": {"N": str(len(entries))},
        G1P: s(index_partition(kind, shard)),
        G1S: s(relay_label(first)),
        **extra,
    }


def _unpacked(commit: PreparedCommit, base: int, kind: str, shard: int) -> list[Item]:
    payloads, make = _kind(commit, kind)
    prefix = "o" if kind == OUTBOX else "s"
    return [
        _relay_item(
            commit,
            base,
            kind,
            f"{prefix}:{j:04x}",
            {str(j): make(unpacked_seq(base, j), p)},
            [j],
            shard,
        )
        for j, p in enumerate(payloads)
    ]


def _packed(commit: PreparedCommit, base: int, kind: str, shard: int) -> list[Item]:
    payloads, make = _kind(commit, kind)
    groups: list[list[int]] = []
    size = 0
    for position, payload in enumerate(payloads):
        entry_size = value_size(make(MAX_SEQ, payload)) + 8
        if not groups or len(groups[-1]) >= CHUNK_SLOTS or size + entry_size > CHUNK_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(position)
        size += entry_size
    if len(groups) > MAX_CHUNKS:
        raise PayloadTooLarge(
            f"commit of execution {commit.execution_id!r} emits or spawns more than "
            f"{MAX_CHUNKS} packed items (350 KB each) can hold in one DynamoDB transaction; "
            "split the fan-out over several steps"
        )
    prefix = "O" if kind == OUTBOX else "S"
    items = []
    for chunk, positions in enumerate(groups):
        entries = {
            str(slot): make(packed_seq(base, chunk, slot), payloads[position])
            for slot, position in enumerate(positions)
        }
        items.append(
            _relay_item(commit, base, kind, f"{prefix}:{chunk:02x}", entries, positions, shard)
        )
    return items


def relays_only(writer: str, emits: tuple[PreparedEmit, ...]) -> PreparedCommit:
    """A commit of ``writer`` that writes nothing but ``emits``: what :func:`relay_items`
    builds an enqueue's outbox item from (no execution item goes with it)."""
    return PreparedCommit(
        execution_id=writer,
        expected_version=0,
        new_version=0,
        definition_id="",
        status="",
        outcome=None,
        active_path=None,
        parent_id=None,
        document="",
        emits=emits,
        processed_event_id=None,
        timers=(),
        spawns=(),
        trace=None,
        committed_at=0.0,
    )


def check_relay_item(item: Item, what: str) -> None:
    """Refuse a relay item DynamoDB cannot store (over 400 KB once compressed), before anything
    is sent."""
    if item_size(item) > ITEM_BUDGET:
        raise PayloadTooLarge(
            f"{what} needs more than a DynamoDB item (400 KB) after compression: keep large "
            "data outside events"
        )


def relay_items(commit: PreparedCommit, base: int, budget: int, shard: int = 0) -> list[Item]:
    """The relay items of a commit: one per entry when they fit in ``budget`` actions, else
    packed (spawns first, then the outbox); indexed in the committing execution's ``shard``."""
    emits, spawns = len(commit.emits), len(commit.spawns)
    if emits + spawns <= budget and emits < MAX_UNPACKED and spawns < MAX_UNPACKED:
        return _unpacked(commit, base, OUTBOX, shard) + _unpacked(commit, base, SPAWNS, shard)
    spawn_items = _packed(commit, base, SPAWNS, shard)
    if emits + len(spawn_items) <= budget and emits < MAX_UNPACKED:
        return _unpacked(commit, base, OUTBOX, shard) + spawn_items
    return _packed(commit, base, OUTBOX, shard) + spawn_items


def build_commit(
    table: str,
    commit: PreparedCommit,
    *,
    base: int,
    token: str,
    cursor: TraceCursor | None,
    trace_max: int | None,
    request_token: str | None = None,
    shards: int = 1,
    work: Sequence[tuple[str | None, Action]] = (),
    bundled: Sequence[WorkTouch] = (),
    guard_mark: bool = True,
) -> CommitWrite:
    """The transaction of one commit attempt.

    ``token`` is the receipt stored for ``commit.new_version``; ``request_token`` the
    transaction's ``ClientRequestToken`` (default: ``token``), unique per distinct request.
    ``cursor`` is the trace cursor at ``commit.expected_version`` (required when the commit
    writes a trace step; used only to remember the cursor otherwise).  Index entries go to the
    execution's shard among ``shards``.  ``work`` holds the action of each work row the
    commit touches (:func:`._work.touch_action`, by group), placed before the relay items so
    the relay packing leaves room for them; ``bundled`` the touches it writes as touch
    bundles instead (:func:`._work.bundle_items`, guarded like relay items).  The dedupe mark
    is guarded by ``attribute_not_exists`` unless ``guard_mark`` is false (an insert over a
    mark an absent execution left behind: it overwrites that mark).
    """
    execution_id = commit.execution_id
    shard = shard_of(execution_id, shards)
    before = cursor if commit.trace is not None else None
    if commit.trace is not None and before is None:
        raise ValueError("a traced commit needs the trace cursor")
    after: TraceCursor | None = None
    if before is not None:
        after = before.after_step(trace_max).at_version(commit.new_version)
    elif cursor is not None:
        after = cursor.at_version(commit.new_version)

    update, size = execution_update(table, commit, token, before, after if before else None, shard)
    actions: list[Action] = [update]
    total = size
    mark_index: int | None = None
    if commit.processed_event_id is not None:
        item = mark_item(execution_id, commit.processed_event_id, commit.committed_at, shard)
        if guard_mark:
            mark_index = len(actions)
            actions.append(guarded_put(table, item))
        else:
            actions.append({"Put": {"TableName": table, "Item": item}})
        total += item_size(item)
    for op in commit.timers:
        if op.action == "schedule":
            item = timer_item(execution_id, op, shard)
            actions.append({"Put": {"TableName": table, "Item": item}})
            total += item_size(item)
        else:
            actions.append(
                {"Delete": {"TableName": table, "Key": timer_key(execution_id, op.path)}}
            )
    trims: list[Item] = []
    if before is not None and after is not None and commit.trace is not None:
        item = step_item(execution_id, before.next_index, commit.trace)
        actions.append({"Put": {"TableName": table, "Item": item}})
        total += item_size(item)
        trims = [step_key(execution_id, index) for index in range(before.low, after.low)]
    work_indexes: dict[int, str | None] = {}
    for group, action in work:
        work_indexes[len(actions)] = group
        actions.append(action)
        total += item_size(action.get("Put", {}).get("Item", {}))
    relay_indexes = set()
    if bundled:
        bundles = bundle_items(base, list(bundled), commit.priority, execution_id, shards)
        for item in bundles:
            relay_indexes.add(len(actions))
            actions.append(guarded_put(table, item))
            total += item_size(item)
    if len(actions) > MAX_ACTIONS:
        raise PayloadTooLarge(
            f"commit of execution {execution_id!r} needs {len(actions)} DynamoDB actions for its "
            f"execution, dedupe mark, timers, trace step and the work rows of its emit targets; "
            f"one transaction holds at most {MAX_ACTIONS}: arm fewer timers or emit to fewer "
            "executions in one step"
        )
    relays = relay_items(commit, base, MAX_ACTIONS - len(actions), shard)
    for item in relays:
        check_relay_item(item, f"an emitted event or spawn context of execution {execution_id!r}")
        relay_indexes.add(len(actions))
        actions.append(guarded_put(table, item))
        total += item_size(item)
    if len(actions) > MAX_ACTIONS:
        raise PayloadTooLarge(
            f"commit of execution {execution_id!r} needs {len(actions)} DynamoDB actions; one "
            f"transaction holds at most {MAX_ACTIONS}: arm fewer timers or emit less in one step"
        )
    if total > TRANSACTION_BUDGET:
        raise PayloadTooLarge(
            f"commit of execution {execution_id!r} writes {total:,} bytes; one DynamoDB "
            f"transaction holds at most {TRANSACTION_LIMIT:,} (4 MB): emit or spawn less per step"
        )
    room = MAX_ACTIONS - len(actions)
    for key in trims[len(trims) - room :] if room < len(trims) else trims:
        actions.append({"Delete": {"TableName": table, "Key": key}})
    deferred = tuple(trims[: max(len(trims) - room, 0)][-DEFERRED_TRIMS:])
    if len(actions) == 1:  # the execution item alone: one conditional UpdateItem
        return CommitWrite(
            operation="update_item",
            params=dict(update["Update"]),
            relay_actions=frozenset(),
            work_actions={},
            mark_action=None,
            after=after,
            deferred_trims=deferred,
            token=token,
        )
    return CommitWrite(
        operation="transact_write_items",
        params={"TransactItems": actions, "ClientRequestToken": request_token or token},
        relay_actions=frozenset(relay_indexes),
        work_actions=work_indexes,
        mark_action=mark_index,
        after=after,
        deferred_trims=deferred,
        token=token,
    )
