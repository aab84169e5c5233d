"""The commit plan: one script call per step, the CAS inside it.

A step that writes the snapshot alone runs :data:`~harel_store_redis._scripts.COMMIT_STATE`
(two declared keys: the execution's hash and the summaries); any other runs
:data:`~harel_store_redis._scripts.COMMIT` with every effect.  Each writes the commit token
(``PreparedCommit.token``) as the receipt of the new version, in the same ``HSET`` as the
document.  Inside the same script call, before any write, the commit is refused (nothing
written) when its ``processed_event_id`` is already recorded (reply
:data:`~harel_store_redis._scripts.ALREADY_PROCESSED`), when the stored version is not
``expected_version``, or when it carries a fence (``PreparedCommit.base``) and the stored
receipt of ``expected_version`` is another token (reply ``CONFLICT``).  A refusal replies with
the stored version and the receipt of the version the commit writes, so core's
:func:`~harel.store.author.refuse_lost` answers in the contract's order without another call:
a re-sent commit that is already stored succeeds, then ``AlreadyProcessed``, then
``StoreConflict``.

Outcomes: a failure that may have come after the server ran the script (the reply lost, the
connection cut) is re-sent within the call, up to :data:`RESENDS` times; when no attempt gets
an answer the commit raises ``CommitOutcomeUnknown``.  A plain ``StoreUnavailable`` means that
no attempt can have run: nothing was written.
"""

from __future__ import annotations

import os
from typing import Any

from harel.store.author import (
    PreparedCommit,
    PreparedEmit,
    refuse_lost,
    trace_keep_from,
    work_touches,
)
from harel.store.errors import CommitOutcomeUnknown, StoreCorrupted, StoreUnavailable

from harel_store_redis._keys import TAG_MARK, TAG_TIMER, UNTARGETED, text
from harel_store_redis._records import summary_row
from harel_store_redis._requests import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    Plan,
    ReplyLost,
    guarded,
    number,
    run_script,
)
from harel_store_redis._schema import Keys, receipt_field
from harel_store_redis._scripts import (
    ALREADY_PROCESSED,
    APPLIED,
    COMMIT,
    COMMIT_STATE,
    CONFLICT,
    SEQ_EXHAUSTED,
)
from harel_store_redis._shard_scripts import COMMIT_SHARDED
from harel_store_redis._touches import touch_args

RESENDS = 2
"""How many times one ``commit`` call re-sends its script after a failure that may have come
after the server ran it (the receipt tells a landed attempt from a lost one)."""


def summary_json(prepared: PreparedCommit) -> bytes:
    """The listing row of a commit (see :func:`~harel_store_redis._records.summary_row`)."""
    p = prepared
    return summary_row(
        p.definition_id,
        p.status,
        p.outcome,
        p.active_path,
        p.new_version,
        p.parent_id,
        p.committed_at,
        execution_id=p.execution_id,
    )


def state_only(prepared: PreparedCommit) -> bool:
    """Whether the commit writes the snapshot alone (the two-key script serves it)."""
    return not prepared.has_side_writes


def _snapshot_args(
    keys: Keys, prepared: PreparedCommit, token: bytes
) -> tuple[tuple[bytes, ...], bytes, list[bytes]]:
    """The listing index keys of the new state, their joined form (the ``ix`` field), and
    ``ARGV[1..7]`` both commit scripts start with: expected and new version, document, token,
    status, summary row, raw id."""
    p = prepared
    index_keys, joined = keys.listing(p.status, p.parent_id is None, p.definition_id)
    args = [
        b"%d" % p.expected_version,
        b"%d" % p.new_version,
        p.document.encode(),
        token,
        p.status.encode(),
        summary_json(p),
        keys.of(p.execution_id).raw_id,
    ]
    return index_keys, joined, args


def fence_args(prepared: PreparedCommit) -> list[bytes]:
    """The 2 ``ARGV`` items of the fence both commit scripts take: the receipt the stored
    ``expected_version`` must hold (``b""``: no fence, the version alone decides) and the
    receipt field of ``expected_version``."""
    base = b"" if prepared.base is None else prepared.base.encode("ascii")
    return [base, receipt_field(prepared.expected_version)]


def state_request(
    keys: Keys, prepared: PreparedCommit, token: bytes
) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """``(KEYS, ARGV)`` of the state-only commit script for ``prepared``."""
    _index_keys, joined, args = _snapshot_args(keys, prepared, token)
    args += [joined, receipt_field(prepared.new_version), *fence_args(prepared)]
    return (keys.of(prepared.execution_id).execution, keys.summaries), tuple(args)


def emit_args(keys: Keys, emit: PreparedEmit) -> list[bytes]:
    """The 4 ``ARGV`` items of one emitted event, as the commit and enqueue scripts take them
    (``emit_entry``): ``t``/``u``, the raw target id (or nothing), the target's owner prefix
    (or the untargeted one), the event JSON."""
    if emit.target_id is None:
        return [b"u", b"", UNTARGETED, emit.event_json.encode()]
    target = keys.of(emit.target_id)
    return [b"t", target.raw_id, target.owner, emit.event_json.encode()]


def seq_exhausted(where: str, what: str) -> StoreUnavailable:
    """The error of a write whose script found no stream id that can be a seq (it wrote
    nothing); ``what`` names the write."""
    return StoreUnavailable(
        f"{where}: the outbox/spawn stream ran out of ids in the current millisecond (the "
        f"server clock stepped back, or over a million entries in one millisecond); nothing "
        f"was written, retry the {what}"
    )


def commit_request(
    keys: Keys, prepared: PreparedCommit, trace_max: int | None, token: bytes
) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """``(KEYS, ARGV)`` of the full commit script for ``prepared``."""
    p = prepared
    trace_keep_from(0, trace_max)  # validates trace_max before anything is sent
    names = keys.of(p.execution_id)
    index_keys, joined, args = _snapshot_args(keys, p, token)
    touches = work_touches(p)
    mark = b""
    if p.processed_event_id is not None:
        mark = names.owner + TAG_MARK + text(p.processed_event_id)  # = _keys.owned(...)
    args += [
        names.owner,
        joined,
        mark,
        number(p.committed_at),
        b"" if p.trace is None else p.trace.encode(),
        str(trace_max or 0).encode(),
        str(len(p.emits)).encode(),
        str(len(p.spawns)).encode(),
        str(len(p.timers)).encode(),
        receipt_field(p.new_version),
        str(len(touches)).encode(),
        *fence_args(p),
    ]
    for emit in p.emits:
        args += emit_args(keys, emit)
    for spawn in p.spawns:
        args += [text(spawn.child_id), text(spawn.root_path), spawn.context_json.encode()]
    for op in p.timers:
        member = names.owner + TAG_TIMER + text(op.path)  # = _keys.owned(...)
        if op.action == "schedule":
            args += [b"s", member, number(op.fire_at)]
        else:
            args += [b"c", member, b""]
    args += touch_args(keys, touches)
    work_keys = keys.work_keys if touches else ()
    return (*names.write_keys, *index_keys, *work_keys), tuple(args)


def new_token() -> bytes:
    """A fresh random token (128 bits, hex): an import's, or a commit's prepared without one."""
    return os.urandom(16).hex().encode("ascii")


def with_token(prepared: PreparedCommit) -> tuple[PreparedCommit, bytes]:
    """``prepared`` and its commit token as sent (a fresh one when it has none)."""
    if prepared.token:
        return prepared, prepared.token.encode("ascii")
    token = new_token()
    return prepared._replace(token=token.decode("ascii")), token


def commit_plan(
    keys: Keys,
    prepared: PreparedCommit,
    trace_max: int | None,
    *,
    where: str,
    limit: int = DEFAULT_MAX_PAYLOAD_BYTES,
    shard: tuple[bytes, bytes] | None = None,
) -> Plan[bytes | None]:
    """Write ``prepared`` in one script call (the two-key one when it writes the snapshot
    alone); raises ``AlreadyProcessed`` when its ``processed_event_id`` is already recorded,
    ``StoreConflict`` when the CAS or the fence is lost to another writer's commit.

    ``shard``: the commit runs in one shard of the sharded layout (``keys`` are that shard's),
    ``(shard number, caller's floor)``; it returns the last relay id it wrote there (``None``
    otherwise, and in the single-slot layout).

    Guarantees: success means the commit is stored exactly once (a re-sent commit found by its
    receipt is not written again); ``AlreadyProcessed``, ``StoreConflict`` and a plain
    ``StoreUnavailable`` mean nothing of it was written; ``CommitOutcomeUnknown`` means an
    attempt may have run and no answer came back, even after :data:`RESENDS` re-sends.
    """
    prepared, token = with_token(prepared)
    if state_only(prepared):
        trace_keep_from(0, trace_max)  # validates trace_max as every commit does
        script, (command_keys, args) = COMMIT_STATE, state_request(keys, prepared, token)
    else:
        script, (command_keys, args) = COMMIT, commit_request(keys, prepared, trace_max, token)
        if shard is not None:
            script, args = COMMIT_SHARDED, (*args, *shard)
    may_have_run = False
    failure: StoreUnavailable | None = None
    for attempt in range(1 + RESENDS):
        try:
            reply = yield from run_script(
                script, command_keys, args, retry_unavailable=False, limit=limit
            )
        except ReplyLost as exc:
            may_have_run, failure = True, exc
            continue
        except StoreUnavailable as exc:  # this attempt did not run
            failure = exc
            if not may_have_run and attempt >= 1:
                break  # twice unreachable: give up, nothing was written
            continue
        decide_commit(prepared, reply, where)
        if script is COMMIT_SHARDED and reply[0] == APPLIED and len(reply) > 1 and reply[1]:
            return bytes(reply[1])
        return None
    if may_have_run:
        raise CommitOutcomeUnknown(
            prepared.execution_id, prepared.expected_version, str(failure)
        ) from failure
    raise StoreUnavailable(
        f"{failure}; nothing of the commit of execution {prepared.execution_id!r} was written"
    ) from failure


def decide_commit(prepared: PreparedCommit, reply: Any, where: str) -> None:
    """Map the commit script's reply: applied, already stored by this very commit (its
    receipt: success), already processed or conflict (raised, in that order), or a typed
    failure."""
    guarded(reply, where)
    if not isinstance(reply, list) or not reply:
        raise StoreCorrupted(f"{where}: unexpected reply {reply!r} from the commit script")
    code = reply[0]
    if code == APPLIED:
        return
    if code == SEQ_EXHAUSTED:
        raise seq_exhausted(where, "commit")
    if code != CONFLICT and code != ALREADY_PROCESSED:
        raise StoreCorrupted(f"{where}: unexpected reply {reply!r} from the commit script")
    found = int(reply[1]) if len(reply) > 1 else None
    raw = reply[2] if len(reply) > 2 else b""
    receipt = raw.decode("ascii", "replace") if isinstance(raw, bytes) and raw else None
    error = refuse_lost(prepared, found, receipt, marked=code == ALREADY_PROCESSED)
    if error is None:
        return  # this very commit is stored: an earlier attempt landed, its answer was lost
    raise error
