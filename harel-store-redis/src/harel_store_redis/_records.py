"""The plans of ``export_execution`` and ``import_execution``: one script each (and the
decoders of stored rows they share with the other reads: relay entries, trace steps, the
summary row).

Export reads the execution's hash, summary row, trace ring and every member of ``P own``
under its owner prefix (marks, timers, targeted outbox entries, spawn intents) in ONE
read-only script, so the record comes from one consistent state.  Import writes a
:class:`~harel.store.author.PreparedImport` in ONE script that checks the execution's absence
before its first write.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from harel.model import Status
from harel.store.author import (
    MAX_DOCUMENT_BYTES,
    PreparedImport,
    check_flag,
    check_id,
    decode_event,
    decode_execution,
    decode_payload,
    decode_trace_step,
    encode_checked,
    import_touches,
    loads,
    show,
)
from harel.store.contract import FINISHED, ExecutionRecord, OutboxEntry, SpawnEntry
from harel.store.errors import (
    ExecutionActive,
    ExecutionAlreadyExists,
    StoreCorrupted,
    StoreUnavailable,
)

from harel_store_redis._keys import (
    TAG_MARK,
    TAG_OUTBOX,
    TAG_SPAWN,
    TAG_TIMER,
    owned,
    seq_of,
    split_owned,
    text,
    untext,
)
from harel_store_redis._requests import Plan, guarded, number, run_script, text_reply
from harel_store_redis._schema import Keys, receipt_field
from harel_store_redis._scripts import (
    ALREADY_EXISTS,
    APPLIED,
    EXPORT,
    IMPORT,
    PURGE,
    SEQ_EXHAUSTED,
)
from harel_store_redis._shard_scripts import IMPORT_SHARDED
from harel_store_redis._touches import touch_args

log = logging.getLogger("harel_store_redis")


def summary_row(
    definition_id: str,
    status: str,
    outcome: str | None,
    active_path: str | None,
    version: int,
    parent_id: str | None,
    updated_at: float,
    *,
    execution_id: str,
) -> bytes:
    """The listing row ``P sum`` holds for an execution: ``[definition, status, outcome,
    active_path, version, parent_id, updated_at]``.

    Encoded without the payload walk: every value comes from an execution whose document was
    just encoded with every field checked (a commit's or an import's), and a finite time.
    """
    row = [definition_id, status, outcome, active_path, version, parent_id, updated_at]
    what = f"summary of execution {execution_id!r}"
    return encode_checked(row, what, MAX_DOCUMENT_BYTES).encode()


def decode_trace(reply: Any, execution_id: str) -> list[dict[str, Any]]:
    """The steps of a trace ring (``"<index> <step JSON>"`` items), oldest first."""
    steps = []
    what = f"a trace step of execution {show(execution_id)}"
    for raw in reply:
        index, _, body = raw.partition(b" ")
        if not index.isdigit():
            raise StoreCorrupted(f"{what} has no index")
        steps.append(decode_trace_step(body, int(index), what=what))
    return steps


# -- export -----------------------------------------------------------------------------------


def export_plan(
    keys: Keys, execution_id: str, others: Sequence[Keys] = ()
) -> Plan[ExecutionRecord | None]:
    """Everything stored for ``execution_id`` from one script, or ``None`` when nothing is.

    ``others``: in the sharded layout, the other shards (``keys`` is the execution's), where
    only outbox entries targeted at it can be: the same script reads each (one per shard)."""
    execution_id = check_id(execution_id)
    names = keys.of(execution_id)
    reply = yield from run_script(EXPORT, names.write_keys, (names.raw_id, names.owner))
    document, summary, trace, rows = reply
    rows = list(rows)
    for other in others:
        there = other.of(execution_id)
        remote = yield from run_script(EXPORT, there.write_keys, (there.raw_id, there.owner))
        rows += remote[3]
    what = f"the stored execution {show(execution_id)}"
    execution = None if document is None else decode_execution(document, what=what)
    record = ExecutionRecord(
        execution_id=execution_id,
        execution=execution,
        updated_at=_updated_at(summary, execution_id) if execution is not None else None,
        trace=tuple(decode_trace(trace, execution_id)),
        **_owned_records(rows, execution_id),
    )
    return None if record.is_empty else record


def _updated_at(summary: bytes | None, execution_id: str) -> float | None:
    if summary is None:
        return None
    try:
        updated_at = loads(summary)[6]
    except (TypeError, ValueError, IndexError) as exc:
        raise StoreCorrupted(
            f"the listing summary of execution {execution_id!r} cannot be read: {exc}"
        ) from exc
    return None if updated_at is None else float(updated_at)


def _owned_records(rows: list[Any], execution_id: str) -> dict[str, Any]:
    """The marks, timers, outbox entries and spawn intents among the owned rows."""
    processed: list[tuple[str, float]] = []
    timers: list[tuple[str, float]] = []
    outbox: list[OutboxEntry] = []
    spawns: list[SpawnEntry] = []
    for member, value in zip(rows[::2], rows[1::2], strict=True):
        if value is None:  # an owned member with nothing behind it: nothing to move
            log.warning("skipping a dangling owned member %r of %r", member[:80], execution_id)
            continue
        _, tag, item = split_owned(member)
        if tag == TAG_MARK:
            processed.append((untext(item), float(value)))
        elif tag == TAG_TIMER:
            timers.append((untext(item), float(value)))
        elif tag == TAG_OUTBOX:
            outbox.append(outbox_entry(seq_of(item), value))
        elif tag == TAG_SPAWN:
            spawns.append(spawn_entry(seq_of(item), value))
    return {
        "processed": tuple(sorted(processed)),
        "timers": tuple(sorted(timers)),
        "outbox": tuple(sorted(outbox, key=lambda entry: entry.seq)),
        "spawns": tuple(sorted(spawns, key=lambda entry: entry.seq)),
    }


def stream_fields(flat: list[bytes], seq: int, *names: bytes) -> list[bytes]:
    """The named fields of a stream entry's flat field list (StoreCorrupted when one lacks)."""
    fields = dict(zip(flat[::2], flat[1::2], strict=True))
    values = []
    for name in names:
        value = fields.get(name)
        if value is None:
            raise StoreCorrupted(f"relay entry {seq} lacks its {name.decode()!r} field")
        values.append(value)
    return values


def outbox_entry(seq: int, flat: list[bytes]) -> OutboxEntry:
    """An outbox stream entry as the contract's ``OutboxEntry``."""
    (event,) = stream_fields(flat, seq, b"e")
    target = dict(zip(flat[::2], flat[1::2], strict=True)).get(b"t")
    return OutboxEntry(
        seq,
        None if target is None else untext(target),
        decode_event(event, what=f"outbox entry {seq}"),
    )


def spawn_entry(seq: int, flat: list[bytes]) -> SpawnEntry:
    """A spawns stream entry as the contract's ``SpawnEntry``."""
    parent, child, root, context = stream_fields(flat, seq, b"p", b"c", b"r", b"x")
    value = decode_payload(context, what=f"spawn {seq}")
    return SpawnEntry(seq, untext(parent), untext(child), untext(root), value)


# -- import -----------------------------------------------------------------------------------


def import_request(
    keys: Keys, prepared: PreparedImport, token: bytes
) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """``(KEYS, ARGV)`` of the import script for ``prepared``."""
    p = prepared
    names = keys.of(p.execution_id)
    exe = p.execution
    index_keys: tuple[bytes, ...] = ()
    head: list[bytes] = [b"0", names.raw_id, names.owner, b"", b"", b"", b"", b"", b"", b"0"]
    if exe is not None:
        status = Status(exe.status)
        index_keys = keys.indexes_of(status, exe.parent_id is None, exe.definition_id)
        row = summary_row(
            exe.definition_id,
            status.value,
            exe.outcome,
            exe.active_path,
            exe.version,
            exe.parent_id,
            exe.updated_at,
            execution_id=p.execution_id,
        )
        next_index = p.trace[-1][0] + 1 if p.trace else 0
        head = [
            b"1",
            names.raw_id,
            names.owner,
            str(exe.version).encode(),
            exe.document.encode(),
            token,
            status.value.encode(),
            row,
            b"\n".join(index_keys),
            str(next_index).encode(),
        ]
    touches = import_touches(p)
    args = [
        *head,
        *(str(len(items)).encode() for items in (p.processed, p.timers, p.emits, p.spawns)),
        str(len(p.trace)).encode(),
        b"" if exe is None else receipt_field(exe.version),
        str(len(touches)).encode(),
    ]
    for event_id, at in p.processed:
        args += [owned(p.execution_id, TAG_MARK, event_id), number(at)]
    for path, fire_at in p.timers:
        args += [owned(p.execution_id, TAG_TIMER, path), number(fire_at)]
    args += [emit.event_json.encode() for emit in p.emits]
    for spawn in p.spawns:
        args += [text(spawn.child_id), text(spawn.root_path), spawn.context_json.encode()]
    args += [str(index).encode() + b" " + step.encode() for index, step in p.trace]
    args += touch_args(keys, touches)
    work_keys = keys.work_keys if touches else ()
    return (*names.write_keys, *index_keys, *work_keys), tuple(args)


def import_plan(
    keys: Keys,
    prepared: PreparedImport,
    token: bytes,
    *,
    where: str,
    limit: int,
    shard: tuple[bytes, bytes] | None = None,
) -> Plan[bytes | None]:
    """Write ``prepared`` in one script; ``ExecutionAlreadyExists`` (nothing written) when the
    execution is stored.  With an execution the script is recognisable by its token, so a lost
    reply is re-sent once; a relays-only import is not (it would append twice).  ``shard``: in
    the execution's shard of the sharded layout; returns the last relay id written there."""
    command_keys, args = import_request(keys, prepared, token)
    with_execution = prepared.execution is not None
    script = IMPORT
    if shard is not None:
        script, args = IMPORT_SHARDED, (*args, *shard)
    try:
        reply = yield from run_script(
            script, command_keys, args, retry_unavailable=with_execution, limit=limit
        )
    except StoreUnavailable as exc:
        raise StoreUnavailable(
            f"{exc}; the import of execution {prepared.execution_id!r} may or may not be "
            "stored: export it from this store before retrying"
        ) from exc
    guarded(reply, where)
    code = reply[0] if isinstance(reply, list) and reply else None
    if code == APPLIED:
        return bytes(reply[1]) if len(reply) > 1 and reply[1] else None
    if code == ALREADY_EXISTS:
        if len(reply) > 1 and reply[1] == token:
            return None  # our own earlier attempt landed; its reply was lost
        raise ExecutionAlreadyExists(prepared.execution_id)
    if code == SEQ_EXHAUSTED:
        raise StoreUnavailable(
            f"{where}: the outbox/spawn stream ran out of ids in the current millisecond; "
            "nothing was written, retry the import"
        )
    raise StoreCorrupted(f"{where}: unexpected reply {reply!r} from the import script")


def purge_plan(keys: Keys, execution_id: str, force: bool, where: str) -> Plan[bool]:
    """Remove the execution and everything it owns in one script; returns whether it existed."""
    execution_id = check_id(execution_id)
    force = check_flag(force, "force")
    names = keys.of(execution_id)
    reply = yield from run_script(
        PURGE,
        (*names.write_keys, *keys.work_keys),
        (
            names.raw_id,
            names.owner,
            b"1" if force else b"0",
            *sorted(status.value.encode() for status in FINISHED),
        ),
    )
    guarded(reply, where)
    if reply[0] == 0:
        raise ExecutionActive(execution_id, text_reply(reply[1]))
    return bool(reply[1])
