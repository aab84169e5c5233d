"""The IO-free plan of the Redis store: the requests each operation sends and how replies
become values, gathered in :class:`RedisPlan` (the ``ContractPlan`` that
:class:`harel.store.common.PlanStore` / ``AsyncPlanStore`` drive; ``sync.py`` and ``aio.py``
only execute its requests).  Commits are in :mod:`harel_store_redis._commit`, export/import
in :mod:`harel_store_redis._records`, the request machinery in
:mod:`harel_store_redis._requests`.

Every operation is ONE server call — a Lua script of :mod:`harel_store_redis._scripts` run by
SHA (``EVALSHA``), so the server never interleaves another client's commands with it:

* a commit's version CAS, its outbox and spawn entries, dedupe mark, timer ops, trace step and
  listing-index moves are one script; a lost CAS writes nothing;
* scripts are loaded once per server (at open); after ``NOSCRIPT`` (a restarted server, a
  ``SCRIPT FLUSH``) the plan re-sends the script's source with ``EVAL``, which also caches it;
* a commit stores its token (``PreparedCommit.token``) as the receipt of the version it
  writes, in a ring of the last eight versions; a re-sent commit (the plan's own resend after a
  lost reply, or the caller's after ``CommitOutcomeUnknown``) that finds its receipt answers
  success without writing again, in the same script call;
* requests larger than ``max_payload_bytes`` are refused before anything is sent;
* ``claim``, ``renew`` and ``release`` are one script each (:mod:`harel_store_redis._claims`);
  a commit or import that adds work touches the claims' work rows in its own script, and so
  does ``enqueue`` (:mod:`harel_store_redis._enqueue`): one script for the entry, the touch
  and the wake-up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from harel.model import Execution, ExecutionPage, ExecutionSummary, Status
from harel.store.common import (
    MAX_DOCUMENT_BYTES,
    ListingQuery,
    PreparedCommit,
    PreparedEnqueue,
    PreparedImport,
    check_event_ref,
    check_flag,
    check_id,
    check_now,
    check_prune,
    check_seq,
    check_timer_ref,
    decode_execution,
    encode_trace_step,
    loads,
    page_from_probe,
    relay_due,
    sweep_limit,
    trace_keep_from,
)
from harel.store.common.validate import show
from harel.store.contract import (
    FINISHED,
    Claim,
    DueTimer,
    ExecutionRecord,
    OutboxEntry,
    SpawnEntry,
)
from harel.store.errors import (
    ExecutionActive,
    ExecutionNotFound,
    StoreCorrupted,
)

from harel_store_redis._claims import claim_plan, release_plan, renew_plan
from harel_store_redis._commit import commit_plan, new_token
from harel_store_redis._enqueue import enqueue_plan
from harel_store_redis._keys import (
    TAG_MARK,
    TAG_TIMER,
    UNTARGETED,
    owned,
    seq_of,
    split_owned,
    stream_id,
    text,
    untext,
)
from harel_store_redis._records import (
    decode_trace,
    export_plan,
    import_plan,
    outbox_entry,
    spawn_entry,
)
from harel_store_redis._requests import (
    Command,
    Plan,
    guarded,
    number,
    run_script,
    text_reply,
)
from harel_store_redis._schema import (
    SCHEMA_VERSION,
    Keys,
    layout_verdict,
    written_by,
)
from harel_store_redis._scripts import (
    ACK,
    APPEND_TRACE,
    DELETE_TIMER,
    DUE_TIMERS,
    IS_PROCESSED,
    LAYOUT,
    LIST,
    LOAD,
    LOAD_FOR_EVENT,
    PENDING,
    PRUNE,
    PURGE,
    READ_TRACE,
    SCRIPTS,
    UPGRADE,
)

log = logging.getLogger("harel_store_redis")


# -- open -----------------------------------------------------------------------------------------


def open_plan(keys: Keys, where: str) -> Plan[None]:
    """Reach the server (``PING``), cache every script it lacks, then check the layout: create
    it in an empty namespace, upgrade an older one in place, refuse a newer or unknown one."""
    yield Command(("PING",))
    present = yield Command(("SCRIPT", "EXISTS", *(script.sha for script in SCRIPTS)))
    for script, exists in zip(SCRIPTS, present, strict=True):
        if not exists:
            sha = yield Command(("SCRIPT", "LOAD", script.source))
            if text_reply(sha) != script.sha:
                raise StoreCorrupted(
                    f"{where}: the server hashed script {script.name} to {sha!r}, not "
                    f"{script.sha}; is this a Redis-compatible server with Lua scripting?"
                )
    version, writer, created = yield from run_script(
        LAYOUT, keys.global_keys, (str(SCHEMA_VERSION).encode(), written_by())
    )
    if layout_verdict(version, writer, bool(created), where) != "upgrade":
        return
    log.info("upgrading the Redis layout of %s from version %s", where, text_reply(version))
    reply = yield from run_script(
        UPGRADE,
        (
            keys.layout,
            keys.schema,
            keys.timers,
            keys.timer_at,
            keys.outbox,
            keys.spawns,
            keys.owned,
            *keys.work_keys,
        ),
        (
            version,
            str(SCHEMA_VERSION).encode(),
            written_by(),
            number(relay_due(time.time())),
            UNTARGETED,
        ),
    )
    version, writer = guarded(reply, where)
    if layout_verdict(version, writer, False, where) != "ready":
        raise StoreCorrupted(f"{where}: the layout upgrade left version {version!r}")


def exists_plan(keys: Keys) -> Plan[bool]:
    """Whether the namespace holds a layout (``P layout``, or version 1's ``P schema``): one
    ``EXISTS``, nothing written (``open_store(url, create=False)``)."""
    found = yield Command(("EXISTS", keys.layout, keys.schema))
    return int(found) > 0


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
    guarded(reply, where)
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
        (owned(execution_id, TAG_TIMER, path), number(fire_at)),
    )
    guarded(reply, where)


def ack_plan(keys: Keys, seq: int, *, spawns: bool, where: str) -> Plan[None]:
    """Remove one relay entry (unknown seq: nothing happens)."""
    entry_id = stream_id(check_seq(seq))
    if entry_id is None:
        return
    reply = yield from run_script(
        ACK,
        (keys.spawns if spawns else keys.outbox, keys.owned),
        (entry_id, b"s" if spawns else b"o", UNTARGETED),
    )
    guarded(reply, where)


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


def prune_plan(keys: Keys, older_than: float, batch_size: int, where: str) -> Plan[int]:
    """Drop marks recorded before ``older_than``, one short script per batch; returns the count."""
    older_than, batch_size = check_prune(older_than, batch_size)
    bound = b"(" + number(older_than)
    total = 0
    while True:
        reply = yield from run_script(
            PRUNE, (keys.marks, keys.owned), (bound, str(batch_size).encode())
        )
        guarded(reply, where)
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


def pending_outbox_plan(keys: Keys, limit: int | None) -> Plan[list[OutboxEntry]]:
    """Undelivered events, oldest first (stream order = commit order)."""
    reply = yield from run_script(PENDING, (keys.outbox,), (_count(limit),))
    return [outbox_entry(seq_of(entry_id), flat) for entry_id, flat in reply]


def pending_spawns_plan(keys: Keys, limit: int | None) -> Plan[list[SpawnEntry]]:
    """Uncreated children, oldest first."""
    reply = yield from run_script(PENDING, (keys.spawns,), (_count(limit),))
    return [spawn_entry(seq_of(entry_id), flat) for entry_id, flat in reply]


def due_timers_plan(keys: Keys, now: float, limit: int | None) -> Plan[list[DueTimer]]:
    """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
    bound = number(check_now(now))
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
    return decode_trace(reply, execution_id)


# -- listing ------------------------------------------------------------------------------------


def listing_plan(keys: Keys, query: ListingQuery) -> Plan[ExecutionPage]:
    """One page ordered by id: each status arm reads at most ``limit + 1`` ids after the
    cursor from its lexicographic index, the arms are merged by id in Python."""
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


# -- the plan object ------------------------------------------------------------------------------


class RedisPlan:
    """The Redis store's :class:`~harel.store.common.ContractPlan`: every contract operation as
    a sans-IO generator over one key prefix (``PlanStore``/``AsyncPlanStore`` drive them)."""

    max_document_bytes = MAX_DOCUMENT_BYTES
    """Core's per-document cap (a whole request is capped by ``max_payload_bytes``)."""

    def __init__(self, keys: Keys, where: str, max_payload_bytes: int) -> None:
        self.keys = keys
        self.where = where
        self.max_payload_bytes = max_payload_bytes

    def open(self) -> Plan[None]:
        """Ping, cache the scripts, check (create, upgrade) the layout."""
        return open_plan(self.keys, self.where)

    def load(self, execution_id: str) -> Plan[Execution | None]:
        """The stored execution or ``None``."""
        return load_plan(self.keys, execution_id)

    def load_for_event(
        self, execution_id: str, event_id: str
    ) -> Plan[tuple[Execution | None, bool]]:
        """``(execution, processed)`` in one call."""
        return load_for_event_plan(self.keys, execution_id, event_id)

    def commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        """One step in one script."""
        limit = self.max_payload_bytes
        return commit_plan(self.keys, prepared, trace_max, where=self.where, limit=limit)

    def enqueue(self, prepared: PreparedEnqueue) -> Plan[int]:
        """One outbox entry for the target, its work-row touch and the wake-up, in one script;
        the entry's seq."""
        limit = self.max_payload_bytes
        return enqueue_plan(self.keys, prepared, where=self.where, limit=limit)

    def is_processed(self, execution_id: str, event_id: str) -> Plan[bool]:
        """Whether the mark exists."""
        return is_processed_plan(self.keys, execution_id, event_id)

    def pending_outbox(self, limit: int | None) -> Plan[list[OutboxEntry]]:
        """Undelivered events, oldest first."""
        return pending_outbox_plan(self.keys, limit)

    def ack_outbox(self, seq: int) -> Plan[None]:
        """Remove one outbox entry."""
        return ack_plan(self.keys, seq, spawns=False, where=self.where)

    def pending_spawns(self, limit: int | None) -> Plan[list[SpawnEntry]]:
        """Uncreated children, oldest first."""
        return pending_spawns_plan(self.keys, limit)

    def ack_spawn(self, seq: int) -> Plan[None]:
        """Remove one spawn intent."""
        return ack_plan(self.keys, seq, spawns=True, where=self.where)

    def due_timers(self, now: float, limit: int | None) -> Plan[list[DueTimer]]:
        """Armed timers due at ``now``."""
        return due_timers_plan(self.keys, now, limit)

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> Plan[None]:
        """Compare-and-delete one timer."""
        return delete_timer_plan(self.keys, execution_id, path, fire_at, self.where)

    def read_trace(self, execution_id: str) -> Plan[list[dict[str, Any]]]:
        """The retained trace steps."""
        return read_trace_plan(self.keys, execution_id)

    def append_trace(
        self, execution_id: str, entry: dict[str, Any], trace_max: int | None
    ) -> Plan[None]:
        """One step outside a commit."""
        return append_trace_plan(self.keys, execution_id, entry, trace_max, self.where)

    def list_executions(self, query: ListingQuery) -> Plan[ExecutionPage]:
        """One listing page."""
        return listing_plan(self.keys, query)

    def purge(self, execution_id: str, force: bool) -> Plan[bool]:
        """Remove the execution and all it owns."""
        return purge_plan(self.keys, execution_id, force, self.where)

    def prune_processed(self, older_than: float, batch_size: int) -> Plan[int]:
        """Drop old marks, batch by batch."""
        return prune_plan(self.keys, older_than, batch_size, self.where)

    def export_execution(self, execution_id: str) -> Plan[ExecutionRecord | None]:
        """Everything stored for the id, from one script."""
        return export_plan(self.keys, execution_id)

    def import_execution(self, prepared: PreparedImport) -> Plan[None]:
        """One record in one atomic script."""
        limit = self.max_payload_bytes
        return import_plan(self.keys, prepared, new_token(), where=self.where, limit=limit)

    def claim(self, owner: str, now: float, lease: float, limit: int) -> Plan[list[Claim]]:
        """Lease up to ``limit`` due units, grouped, in one script."""
        return claim_plan(self.keys, owner, now, lease, limit, self.where)

    def renew(self, owner: str, key: str | None, now: float, lease: float) -> Plan[float]:
        """Extend an unexpired lease held by ``owner``, in one script."""
        return renew_plan(self.keys, owner, key, now, lease, self.where)

    def release(
        self, owner: str, key: str | None, retry_at: float | None, now: float
    ) -> Plan[None]:
        """Free a lease held by ``owner`` (re-dated from what is left), in one script."""
        return release_plan(self.keys, owner, key, retry_at, now, self.where)
