"""The IO-free plan of the Redis store: the requests each operation sends and how replies
become values.  ``sync.py`` (redis-py) and ``aio.py`` (redis.asyncio) only execute these plans
through :func:`harel.store.common.drive` / :func:`~harel.store.common.adrive`.

Every operation is ONE server call — a Lua script of :mod:`harel_store_redis._scripts` run by
SHA (``EVALSHA``), so the server never interleaves another client's commands with it:

* a commit's version CAS, its outbox and spawn entries, dedupe mark, timer ops, trace step and
  listing-index moves are one script; a lost CAS writes nothing;
* scripts are loaded once per server (at open); after ``NOSCRIPT`` (a restarted server, a
  ``SCRIPT FLUSH``) the plan re-sends the script's source with ``EVAL``, which also caches it;
* a commit carries a random token stored with the execution: re-running the very same script
  (after a lost reply) either applies it or recognises it as already applied, so a commit whose
  reply was lost is retried once, safely;
* requests larger than ``max_payload_bytes`` are refused before anything is sent.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from harel.model import Execution, ExecutionPage, ExecutionSummary, Status
from harel.store.common import (
    PreparedCommit,
    check_event_ref,
    check_flag,
    check_id,
    check_now,
    check_prune,
    check_seq,
    check_timer_ref,
    conflict,
    decode_event,
    decode_execution,
    decode_payload,
    decode_trace_step,
    dumps,
    encode_trace_step,
    listing_query,
    loads,
    page_from_probe,
    sweep_limit,
    trace_keep_from,
)
from harel.store.common.validate import show
from harel.store.contract import FINISHED, DueTimer, OutboxEntry, SpawnEntry
from harel.store.errors import (
    ExecutionActive,
    ExecutionNotFound,
    PayloadTooLarge,
    StoreCorrupted,
    StoreUnavailable,
)

from harel_store_redis._keys import (
    TAG_MARK,
    TAG_TIMER,
    owned,
    owner_prefix,
    seq_of,
    split_owned,
    stream_id,
    text,
    untext,
)
from harel_store_redis._schema import SCHEMA_VERSION, Keys, check_schema
from harel_store_redis._scripts import (
    ACK,
    APPEND_TRACE,
    APPLIED,
    COMMIT,
    CONFLICT,
    DELETE_TIMER,
    DUE_TIMERS,
    IS_PROCESSED,
    LIST,
    LOAD,
    LOAD_FOR_EVENT,
    PENDING,
    PRUNE,
    PURGE,
    READ_TRACE,
    SCHEMA,
    SCRIPTS,
    SEQ_EXHAUSTED,
    WRONG_TYPE,
    LuaScript,
)

log = logging.getLogger("harel_store_redis")

DEFAULT_MAX_PAYLOAD_BYTES = 512 * 1024 * 1024
"""Largest request one operation may send: Redis' default ``proto-max-bulk-len``."""


# -- requests -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Command:
    """One Redis command; ``wire`` is what the driver hands ``execute_command``."""

    wire: tuple[Any, ...]


def evalsha(script: LuaScript, keys: Sequence[bytes], args: Sequence[bytes]) -> Command:
    """Run a cached script by SHA."""
    return Command(("EVALSHA", script.sha, len(keys), *keys, *args))


def eval_source(script: LuaScript, keys: Sequence[bytes], args: Sequence[bytes]) -> Command:
    """Run a script from its source (and cache it on the server)."""
    return Command(("EVAL", script.source, len(keys), *keys, *args))


class ScriptMissing(Exception):
    """The server answered ``NOSCRIPT`` (the drivers' error mapping raises it into the plan)."""


T = TypeVar("T")

Plan: TypeAlias = Generator[Command, Any, T]
"""A sans-IO operation returning ``T``: yields commands, is sent each command's reply."""


def run_script(
    script: LuaScript,
    keys: Sequence[bytes],
    args: Sequence[bytes],
    *,
    retry_unavailable: bool = True,
    limit: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Plan[Any]:
    """One server call: ``EVALSHA``, falling back to ``EVAL`` after ``NOSCRIPT``.

    With ``retry_unavailable`` (idempotent scripts only) a connection or timeout failure is
    retried once on a fresh connection: a pooled connection the server closed while idle fails
    its first command, and a commit whose reply was lost learns its outcome from the re-run.
    """
    size = sum(len(value) for value in (*keys, *args))
    if size > limit:
        raise PayloadTooLarge(
            f"{script.name} would send {size} bytes to Redis, over the limit of {limit} bytes "
            "(max_payload_bytes; Redis refuses values over proto-max-bulk-len, 512 MiB by "
            "default): store less in the context, events or trace steps"
        )
    attempts = 2 if retry_unavailable else 1
    for attempt in range(attempts):
        try:
            try:
                return (yield evalsha(script, keys, args))
            except ScriptMissing:
                return (yield eval_source(script, keys, args))
        except StoreUnavailable:
            if attempt + 1 >= attempts:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _wrong_type(reply: Any, where: str) -> StoreCorrupted:
    key = reply[1] if isinstance(reply, list) and len(reply) > 1 else b"?"
    shown = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
    return StoreCorrupted(
        f"Redis key {shown[:200]!r} in {where} holds a value of another type than harel "
        "writes there (something else wrote under this prefix); nothing was written. Move the "
        "foreign key away or use another prefix"
    )


def _guarded(reply: Any, where: str) -> Any:
    """``reply`` itself unless it is a script's wrong-type report."""
    if isinstance(reply, list) and reply and reply[0] == WRONG_TYPE:
        raise _wrong_type(reply, where)
    return reply


# -- open -----------------------------------------------------------------------------------------


def open_plan(keys: Keys, where: str) -> Plan[None]:
    """Reach the server (``PING``), cache every script it lacks, check the layout version."""
    yield Command(("PING",))
    present = yield Command(("SCRIPT", "EXISTS", *(script.sha for script in SCRIPTS)))
    for script, exists in zip(SCRIPTS, present, strict=True):
        if not exists:
            sha = yield Command(("SCRIPT", "LOAD", script.source))
            if _text_reply(sha) != script.sha:
                raise StoreCorrupted(
                    f"{where}: the server hashed script {script.name} to {sha!r}, not "
                    f"{script.sha}; is this a Redis-compatible server with Lua scripting?"
                )
    found = yield from run_script(
        SCHEMA, (keys.schema, *keys.global_keys[1:]), (str(SCHEMA_VERSION).encode(),)
    )
    check_schema(found, where)


def _text_reply(reply: Any) -> str:
    return reply.decode("ascii", "replace") if isinstance(reply, bytes) else str(reply)


# -- commit -------------------------------------------------------------------------------------


def _number(value: float) -> bytes:
    """A score as Redis parses it exactly (``repr`` is the shortest exact decimal)."""
    return repr(float(value)).encode("ascii")


def summary_json(prepared: PreparedCommit) -> bytes:
    """The listing row of a commit: ``[definition, status, outcome, active_path, version,
    parent_id, updated_at]``."""
    p = prepared
    row = [
        p.definition_id,
        p.status,
        p.outcome,
        p.active_path,
        p.new_version,
        p.parent_id,
        p.committed_at,
    ]
    return dumps(row, what=f"summary of execution {p.execution_id!r}").encode()


def commit_request(
    keys: Keys, prepared: PreparedCommit, trace_max: int | None, token: bytes
) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """``(KEYS, ARGV)`` of the commit script for ``prepared``."""
    p = prepared
    trace_keep_from(0, trace_max)  # validates trace_max before anything is sent
    status = Status(p.status)
    index_keys = keys.indexes_of(status, p.parent_id is None, p.definition_id)
    mark = b""
    if p.processed_event_id is not None:
        mark = owned(p.execution_id, TAG_MARK, p.processed_event_id)
    args: list[bytes] = [
        str(p.expected_version).encode(),
        str(p.new_version).encode(),
        p.document.encode(),
        token,
        status.value.encode(),
        summary_json(p),
        text(p.execution_id),
        owner_prefix(p.execution_id),
        b"\n".join(index_keys),
        mark,
        _number(p.committed_at),
        b"" if p.trace is None else p.trace.encode(),
        str(trace_max or 0).encode(),
        str(len(p.emits)).encode(),
        str(len(p.spawns)).encode(),
        str(len(p.timers)).encode(),
    ]
    for emit in p.emits:
        if emit.target_id is None:
            args += [b"u", b"", b"", emit.event_json.encode()]
        else:
            args += [
                b"t",
                text(emit.target_id),
                owner_prefix(emit.target_id),
                emit.event_json.encode(),
            ]
    for spawn in p.spawns:
        args += [text(spawn.child_id), text(spawn.root_path), spawn.context_json.encode()]
    for op in p.timers:
        member = owned(p.execution_id, TAG_TIMER, op.path)
        if op.action == "schedule":
            args += [b"s", member, _number(op.fire_at)]
        else:
            args += [b"c", member, b""]
    command_keys = (*keys.write_keys(p.execution_id), *index_keys)
    return command_keys, tuple(args)


def new_token() -> bytes:
    """A fresh commit token (recognises a commit's own earlier, reply-lost attempt)."""
    return uuid.uuid4().hex.encode("ascii")


def commit_plan(
    keys: Keys,
    prepared: PreparedCommit,
    trace_max: int | None,
    *,
    where: str,
    limit: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Plan[None]:
    """Write ``prepared`` in one script call; raises ``StoreConflict`` when the CAS is lost.

    The script is idempotent by its token, so a connection failure re-sends it once: if the
    first attempt did land, the re-run reports a conflict carrying this commit's own token,
    which counts as success.
    """
    token = new_token()
    command_keys, args = commit_request(keys, prepared, trace_max, token)
    try:
        reply = yield from run_script(COMMIT, command_keys, args, limit=limit)
    except StoreUnavailable as exc:
        raise StoreUnavailable(
            f"{exc}; the commit of execution {prepared.execution_id!r} may or may not be "
            "stored: load the execution before retrying the step"
        ) from exc
    decide_commit(prepared, reply, token, where)


def decide_commit(prepared: PreparedCommit, reply: Any, token: bytes, where: str) -> None:
    """Map the commit script's reply: applied, conflict (raised), or a typed failure."""
    _guarded(reply, where)
    if not isinstance(reply, list) or not reply:
        raise StoreCorrupted(f"{where}: unexpected reply {reply!r} from the commit script")
    code = reply[0]
    if code == APPLIED:
        return
    if code == SEQ_EXHAUSTED:
        raise StoreUnavailable(
            f"{where}: the outbox/spawn stream ran out of ids in the current millisecond (the "
            "server clock stepped back, or over a million entries in one commit); nothing was "
            "written, retry the commit"
        )
    if code != CONFLICT:
        raise StoreCorrupted(f"{where}: unexpected reply {reply!r} from the commit script")
    if len(reply) < 2:
        raise conflict(prepared, None)
    found = int(reply[1])
    if len(reply) > 2 and reply[2] == token and found == prepared.new_version:
        return  # our own earlier attempt landed; its reply was lost
    raise conflict(prepared, found)


# -- single-call writes ---------------------------------------------------------------------------


def append_trace_plan(
    keys: Keys, execution_id: str, entry: dict[str, Any], trace_max: int | None, where: str
) -> Plan[None]:
    """Append one step outside a commit (same index and ring rules); not retried (not
    idempotent).  Unknown execution: ``ExecutionNotFound``, nothing written."""
    execution_id = check_id(execution_id)
    body = encode_trace_step(entry)
    trace_keep_from(0, trace_max)
    reply = yield from run_script(
        APPEND_TRACE,
        (keys.execution(execution_id), keys.trace(execution_id)),
        (body.encode(), str(trace_max or 0).encode()),
        retry_unavailable=False,
    )
    _guarded(reply, where)
    if reply == 0:
        raise ExecutionNotFound(execution_id)


def delete_timer_plan(
    keys: Keys, execution_id: str, path: str, fire_at: float, where: str
) -> Plan[None]:
    """Disarm a timer only while it still holds exactly ``fire_at``."""
    execution_id, path, fire_at = check_timer_ref(execution_id, path, fire_at)
    reply = yield from run_script(
        DELETE_TIMER,
        (keys.timers, keys.timer_at, keys.owned),
        (owned(execution_id, TAG_TIMER, path), _number(fire_at)),
    )
    _guarded(reply, where)


def ack_plan(keys: Keys, seq: int, *, spawns: bool, where: str) -> Plan[None]:
    """Remove one relay entry (unknown seq: nothing happens)."""
    entry_id = stream_id(check_seq(seq))
    if entry_id is None:
        return
    reply = yield from run_script(
        ACK,
        (keys.spawns if spawns else keys.outbox, keys.owned),
        (entry_id, b"s" if spawns else b"o"),
    )
    _guarded(reply, where)


def purge_plan(keys: Keys, execution_id: str, force: bool, where: str) -> Plan[bool]:
    """Remove the execution and everything it owns in one script; returns whether it existed."""
    execution_id = check_id(execution_id)
    force = check_flag(force, "force")
    reply = yield from run_script(
        PURGE,
        keys.write_keys(execution_id),
        (
            text(execution_id),
            owner_prefix(execution_id),
            b"1" if force else b"0",
            *sorted(status.value.encode() for status in FINISHED),
        ),
    )
    _guarded(reply, where)
    if reply[0] == 0:
        raise ExecutionActive(execution_id, _text_reply(reply[1]))
    return bool(reply[1])


def prune_plan(keys: Keys, older_than: float, batch_size: int, where: str) -> Plan[int]:
    """Drop marks recorded before ``older_than``, one short script per batch; returns the count."""
    older_than, batch_size = check_prune(older_than, batch_size)
    bound = b"(" + _number(older_than)
    total = 0
    while True:
        reply = yield from run_script(
            PRUNE, (keys.marks, keys.owned), (bound, str(batch_size).encode())
        )
        _guarded(reply, where)
        total += int(reply)
        if int(reply) < batch_size:
            return total


# -- reads --------------------------------------------------------------------------------------


def load_plan(keys: Keys, execution_id: str) -> Plan[Execution | None]:
    """The stored execution (a fresh object) or ``None``."""
    execution_id = check_id(execution_id)
    reply = yield from run_script(LOAD, (keys.execution(execution_id),), ())
    return _execution(reply, execution_id)


def _execution(document: Any, execution_id: str) -> Execution | None:
    if document is None:
        return None
    return decode_execution(document, what=f"the stored execution {show(execution_id)}")


def load_for_event_plan(
    keys: Keys, execution_id: str, event_id: str
) -> Plan[tuple[Execution | None, bool]]:
    """``(execution, processed)`` in one call; unknown execution: ``(None, False)``."""
    execution_id, event_id = check_event_ref(execution_id, event_id)
    document, score = yield from run_script(
        LOAD_FOR_EVENT,
        (keys.execution(execution_id), keys.marks),
        (owned(execution_id, TAG_MARK, event_id),),
    )
    exe = _execution(document, execution_id)
    return (None, False) if exe is None else (exe, score is not None)


def is_processed_plan(keys: Keys, execution_id: str, event_id: str) -> Plan[bool]:
    """Whether ``execution_id`` recorded ``event_id`` as processed."""
    execution_id, event_id = check_event_ref(execution_id, event_id)
    score = yield from run_script(
        IS_PROCESSED, (keys.marks,), (owned(execution_id, TAG_MARK, event_id),)
    )
    return score is not None


def _count(limit: int | None) -> bytes:
    checked = sweep_limit(limit)
    return b"" if checked is None else str(checked).encode()


def _fields(entry: Any) -> tuple[bytes, dict[bytes, bytes]]:
    entry_id, flat = entry
    return entry_id, dict(zip(flat[::2], flat[1::2], strict=True))


def pending_outbox_plan(keys: Keys, limit: int | None) -> Plan[list[OutboxEntry]]:
    """Undelivered events, oldest first (stream order = commit order)."""
    reply = yield from run_script(PENDING, (keys.outbox,), (_count(limit),))
    entries = []
    for raw in reply:
        entry_id, fields = _fields(raw)
        seq = seq_of(entry_id)
        target = fields.get(b"t")
        event = decode_event(_field(fields, b"e", seq), what=f"outbox entry {seq}")
        entries.append(OutboxEntry(seq, None if target is None else untext(target), event))
    return entries


def pending_spawns_plan(keys: Keys, limit: int | None) -> Plan[list[SpawnEntry]]:
    """Uncreated children, oldest first."""
    reply = yield from run_script(PENDING, (keys.spawns,), (_count(limit),))
    entries = []
    for raw in reply:
        entry_id, fields = _fields(raw)
        seq = seq_of(entry_id)
        parent, child, root, context = (
            _field(fields, name, seq) for name in (b"p", b"c", b"r", b"x")
        )
        context_value = decode_payload(context, what=f"spawn {seq}")
        entries.append(SpawnEntry(seq, untext(parent), untext(child), untext(root), context_value))
    return entries


def _field(fields: dict[bytes, bytes], name: bytes, seq: int) -> bytes:
    value = fields.get(name)
    if value is None:
        raise StoreCorrupted(f"relay entry {seq} lacks its {name.decode()!r} field")
    return value


def due_timers_plan(keys: Keys, now: float, limit: int | None) -> Plan[list[DueTimer]]:
    """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
    bound = _number(check_now(now))
    reply = yield from run_script(DUE_TIMERS, (keys.timers, keys.timer_at), (bound, _count(limit)))
    due: list[DueTimer] = []
    for member, score, exact in zip(reply[::3], reply[1::3], reply[2::3], strict=True):
        try:
            execution_id, _tag, path = split_owned(member)
            due.append((execution_id, untext(path), float(exact if exact is not None else score)))
        except (StoreCorrupted, ValueError) as exc:
            log.warning("skipping an unreadable timer %r: %s", member[:80], exc)
    return due


def read_trace_plan(keys: Keys, execution_id: str) -> Plan[list[dict[str, Any]]]:
    """The retained trace steps, oldest first, each with its store-assigned ``index``."""
    execution_id = check_id(execution_id)
    reply = yield from run_script(READ_TRACE, (keys.trace(execution_id),), ())
    steps = []
    what = f"a trace step of execution {show(execution_id)}"
    for raw in reply:
        index, _, body = raw.partition(b" ")
        if not index.isdigit():
            raise StoreCorrupted(f"{what} has no index")
        steps.append(decode_trace_step(body, int(index), what=what))
    return steps


# -- listing ------------------------------------------------------------------------------------


def listing_plan(
    keys: Keys,
    *,
    status: Iterable[Status] | None,
    definition_id: str | None,
    roots_only: bool,
    limit: int,
    cursor: str | None,
) -> Plan[ExecutionPage]:
    """One page ordered by id: each status arm reads at most ``limit + 1`` ids after the
    cursor from its lexicographic index, the arms are merged by id in Python."""
    query = listing_query(
        status=status,
        definition_id=definition_id,
        roots_only=roots_only,
        limit=limit,
        cursor=cursor,
    )
    if query.matches_nothing:
        return ExecutionPage()
    statuses: Sequence[Status | None] = [None] if query.statuses is None else sorted(query.statuses)
    arms = tuple(keys.index(s, query.roots_only, query.definition_id) for s in statuses)
    low = b"-" if query.after is None else b"(" + text(query.after)
    probe = query.probe_limit
    reply = yield from run_script(LIST, (keys.summaries, *arms), (low, str(probe).encode()))
    rows: dict[bytes, Any] = {}
    for arm in reply:
        for raw_id, summary in zip(arm[::2], arm[1::2], strict=True):
            rows[raw_id] = summary
    chosen = sorted(rows)[:probe]
    return page_from_probe(query, [_summary(raw_id, rows[raw_id]) for raw_id in chosen])


def _summary(raw_id: bytes, row: bytes | None) -> ExecutionSummary:
    execution_id = untext(raw_id)
    try:
        if row is None:
            raise ValueError("no summary row")
        definition, status, outcome, active_path, version, parent_id, updated_at = loads(row)
        return ExecutionSummary(
            id=execution_id,
            definition_id=definition,
            status=Status(status),
            outcome=outcome,
            active_path=active_path,
            version=version,
            parent_id=parent_id,
            updated_at=updated_at,
        )
    except (TypeError, ValueError) as exc:
        raise StoreCorrupted(
            f"the listing summary of execution {execution_id!r} cannot be read: {exc}"
        ) from exc
