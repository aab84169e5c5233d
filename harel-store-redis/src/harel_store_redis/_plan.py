"""The IO-free plan of the Redis store: the requests each operation sends and how replies
become values, gathered in :class:`RedisPlan` (the ``ContractPlan`` that
:class:`harel.store.author.PlanStore` / ``AsyncPlanStore`` drive; ``sync.py`` and ``aio.py``
only execute its requests).  Commits are in :mod:`harel_store_redis._commit`, export/import
in :mod:`harel_store_redis._records`, the request machinery in
:mod:`harel_store_redis._requests`.

Every operation is ONE server call — a Lua script of :mod:`harel_store_redis._scripts` run by
SHA (``EVALSHA``), so the server never interleaves another client's commands with it:

* a commit's checks (its dedupe mark not yet recorded, the version CAS, the fence: the stored
  receipt of the expected version), its outbox and spawn entries, dedupe mark, timer ops,
  trace step and listing-index moves are one script; a refused commit writes nothing
  (``AlreadyProcessed`` or ``StoreConflict``, see :mod:`harel_store_redis._commit`);
* scripts are loaded once per server (at open); after ``NOSCRIPT`` (a restarted server, a
  ``SCRIPT FLUSH``) the plan re-sends the script's source with ``EVAL``, which also caches it;
* a commit stores its token (``PreparedCommit.token``) as the receipt of the version it
  writes, in a ring of the last eight versions; a re-sent commit (the plan's own resend after a
  lost reply, or the caller's after ``CommitOutcomeUnknown``) that finds its receipt answers
  success without writing again, in the same script call;
* requests larger than ``max_payload_bytes`` are refused before anything is sent;
* in the sharded layout (``?shards=N``, :mod:`harel_store_redis._shards`) every commit, read of
  one execution and enqueue is still one script, in the execution's shard; sweeps, listing,
  claims, purge, export and prune make one per shard;
* ``claim``, ``renew``, ``release`` and ``list_leases`` are one script each
  (:mod:`harel_store_redis._claims`);
  a commit or import that adds work touches the claims' work rows in its own script, and so
  does ``enqueue`` (:mod:`harel_store_redis._enqueue`): one script for the entry, the touch
  and the wake-up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any, cast

from harel.model import Execution, ExecutionPage, ExecutionSummary, Status
from harel.store.author import (
    MAX_DOCUMENT_BYTES,
    ListingQuery,
    OpenSteps,
    PreparedCommit,
    PreparedEnqueue,
    PreparedImport,
    SchemaVerdict,
    Stored,
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
    open_flow,
    page_from_probe,
    relay_due,
    show,
    sweep_limit,
    trace_keep_from,
)
from harel.store.contract import (
    Claim,
    DueTimer,
    ExecutionRecord,
    Lease,
    OutboxEntry,
    SpawnEntry,
)
from harel.store.errors import (
    ExecutionNotFound,
    StoreConfigError,
    StoreCorrupted,
)

from harel_store_redis._claims import claim_plan, leases_plan, release_plan, renew_plan
from harel_store_redis._commit import commit_plan, new_token
from harel_store_redis._enqueue import enqueue_plan
from harel_store_redis._keys import (
    TAG_MARK,
    TAG_TIMER,
    UNTARGETED,
    hash_tag,
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
    purge_plan,
    spawn_entry,
)
from harel_store_redis._requests import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    Command,
    Plan,
    guarded,
    number,
    run_script,
    text_reply,
)
from harel_store_redis._reshard import to_sharded_plan
from harel_store_redis._schema import (
    DISTRIBUTION,
    SCHEMA_VERSION,
    SHARDED_VERSION,
    UPGRADES,
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
    READ_TRACE,
    SCRIPTS,
    UPGRADE,
    LuaScript,
)
from harel_store_redis._shard_scripts import LAYOUT_SHARDED, SHARDED_SCRIPTS
from harel_store_redis._shards import (
    Floor,
    ShardMap,
    claim_sharded,
    commit_sharded,
    enqueue_sharded,
    export_sharded,
    home_keys,
    import_sharded,
    leases_sharded,
    pending_outbox_sharded,
    pending_spawns_sharded,
    release_sharded,
    renew_sharded,
)
from harel_store_redis._spec import MAX_SHARDS

log = logging.getLogger("harel_store_redis")


# -- open -----------------------------------------------------------------------------------------


def untagged_on_cluster(where: str) -> StoreConfigError:
    """The error of the single-slot layout on a Redis Cluster under a prefix without a hash
    tag (its keys would live in many slots, and every operation touches several of them)."""
    return StoreConfigError(
        f"{where} is a Redis Cluster, and the store's prefix has no hash tag: one operation "
        "touches several of its keys, which must share a slot. Give the store a prefix with a "
        "hash tag, e.g. ?prefix={harel}: (one shard holds the whole store), or use the sharded "
        "layout, ?shards=N with a prefix without braces (the store spread over N slots)"
    )


def per_node(reply: Any) -> list[Any]:
    """A reply as one value per node: a cluster client answers a command it sent to every
    master (``SCRIPT EXISTS``, ``SCRIPT LOAD``) with ``{node: reply}``."""
    return list(reply.values()) if isinstance(reply, dict) else [reply]


def load_scripts_plan(scripts: Sequence[LuaScript], where: str) -> Plan[None]:
    """Cache every script a server (on a cluster: every master) lacks: ``SCRIPT EXISTS``, then
    ``SCRIPT LOAD`` per missing one."""
    answers = per_node((yield Command(("SCRIPT EXISTS", *(script.sha for script in scripts)))))
    present = [all(flags) for flags in zip(*answers, strict=True)]
    for script, exists in zip(scripts, present, strict=True):
        if not exists:
            for sha in per_node((yield Command(("SCRIPT LOAD", script.source)))):
                if text_reply(sha) != script.sha:
                    raise StoreCorrupted(
                        f"{where}: the server hashed script {script.name} to {sha!r}, not "
                        f"{script.sha}; is this a Redis-compatible server with Lua scripting?"
                    )


OPEN_SCRIPTS: tuple[LuaScript, ...] = (*SCRIPTS, *SHARDED_SCRIPTS)
"""Every script both layouts run, loaded at open (``SCRIPT EXISTS``, then the missing ones)."""


def braced_prefix(where: str) -> StoreConfigError:
    """The error of the sharded layout under a prefix with braces (its own hash tag would put
    every shard in one slot)."""
    return StoreConfigError(
        f"{where}: the sharded layout (?shards=N) gives each shard its own hash tag after the "
        "prefix, so the prefix must hold no '{' or '}'; use a prefix like harel: (or drop "
        "?shards= to keep the whole store in the prefix's one slot)"
    )


def open_plan(
    keys: Keys,
    where: str,
    *,
    cluster: bool = False,
    shards: int | None = None,
    floor: Floor | None = None,
    limit: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Plan[int | None]:
    """Reach the server (``PING``), cache every script it lacks, then check the layout: create
    it in an empty namespace, upgrade an older one in place, refuse a newer or unknown one.
    Returns the shard count when the namespace holds the sharded layout (layout 5: it holds
    one already, or ``shards`` asked for a new one), ``None`` for the single-slot layout.

    On a Redis Cluster the single-slot layout needs a prefix with a hash tag, the sharded one
    a prefix without braces: ``StoreConfigError`` naming the fix before anything is written."""
    tagged = hash_tag(keys.prefix) is not None
    if shards is not None and (b"{" in keys.prefix or b"}" in keys.prefix):
        raise braced_prefix(where)
    probe = shards is not None or (cluster and not tagged)
    yield Command(("PING",))
    yield from load_scripts_plan(OPEN_SCRIPTS, where)
    floor = Floor() if floor is None else floor
    if probe:
        return (
            yield from open_sharded_plan(
                keys, where, cluster=cluster, shards=shards, floor=floor, limit=limit
            )
        )
    steps = RedisOpen(keys, where)
    verdict = yield from open_flow(steps)
    count = steps.reply[3] if len(steps.reply) > 3 else None
    if steps.sharded:
        return stored_shards(count, where)
    if verdict != "upgrade" and count is not None:  # layout 4 on its way to the sharded one
        stored = stored_shards(count, where)
        yield from to_sharded_plan(keys, stored, floor, where, limit)
        return stored
    return None


class RedisOpen(OpenSteps):
    """The single-slot layout's steps of the shared open flow.  No lock: the probe is the
    :data:`~harel_store_redis._scripts.LAYOUT` script, which also creates the layout of an
    empty namespace in the same atomic call (so ``create`` has nothing left to do), and an
    upgrade is one atomic script (:func:`upgrade_single_slot_plan`) several openers may run
    at once.  The verdict is :func:`~harel_store_redis._schema.layout_verdict`'s on the
    script's ``reply``; ``sharded``: it found the sharded layout (ready, with its count)."""

    current = SCHEMA_VERSION
    upgrades = UPGRADES
    distribution = DISTRIBUTION

    def __init__(self, keys: Keys, where: str) -> None:
        self.keys, self.where = keys, where
        self.reply: list[Any] = []
        self.sharded = False

    def probe(self) -> Plan[Stored]:
        layout = (str(SCHEMA_VERSION).encode(), written_by())
        self.reply = yield from run_script(LAYOUT, self.keys.global_keys, layout)
        return Stored()

    def verdict(self, found: Stored) -> SchemaVerdict:
        version, writer, created = self.reply[:3]
        verdict = layout_verdict(version, writer, bool(created), self.where)
        self.sharded = verdict == "sharded"
        return "ready" if self.sharded else cast(SchemaVerdict, verdict)

    def create(self) -> Plan[None]:
        yield from ()

    def upgrade(self, version: int) -> Plan[None]:
        yield from upgrade_single_slot_plan(self.keys, self.where, self.reply[0])


def upgrade_single_slot_plan(keys: Keys, where: str, version: bytes) -> Plan[None]:
    """Layout 1, 2 or 3 -> 4 in one atomic script (several openers: the first upgrades)."""
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


def stored_shards(raw: Any, where: str) -> int:
    """The shard count a sharded layout's record holds (StoreCorrupted when unreadable)."""
    try:
        count = int(raw)
    except (TypeError, ValueError):
        raise StoreCorrupted(
            f"{where} holds the sharded layout without a readable shard count ({raw!r})"
        ) from None
    if not 1 <= count <= MAX_SHARDS:
        raise StoreCorrupted(f"{where} holds the sharded layout with {count} shards")
    return count


def open_sharded_plan(
    keys: Keys,
    where: str,
    *,
    cluster: bool,
    shards: int | None,
    floor: Floor,
    limit: int,
) -> Plan[int | None]:
    """The layout check with single-key calls only (they run in any slot): ``P layout``'s
    record, else version 1's ``P schema``; create the sharded layout in an empty namespace
    when ``shards`` asks for it.  A stored sharded layout opens with its own shard count
    (another ``shards`` is a ``StoreConfigError``)."""
    version, writer, count, _created = yield from run_script(
        LAYOUT_SHARDED, (keys.layout,), (str(SHARDED_VERSION).encode(), written_by(), b"", b"0")
    )
    if version is None:
        version = yield Command(("GET", keys.schema))
    if version is None:
        if shards is None:
            raise untagged_on_cluster(where)
        version, writer, count, created = yield from run_script(
            LAYOUT_SHARDED,
            (keys.layout,),
            (str(SHARDED_VERSION).encode(), written_by(), b"%d" % shards, b"1"),
        )
        if created:
            yield Command(("SET", keys.schema, str(SHARDED_VERSION).encode()))
    verdict = layout_verdict(version, writer, False, where)
    if verdict == "sharded":
        stored = stored_shards(count, where)
        if shards is not None and shards != stored:
            raise StoreConfigError(
                f"{where} holds the sharded layout with {stored} shards, not {shards}: open it "
                f"with ?shards={stored} (or without ?shards=); changing the shard count means "
                "moving the data to a new prefix with `harel migrate`"
            )
        return stored
    target = shards if count is None else stored_shards(count, where)  # (an upgrade begun)
    if target is None:  # a single-slot layout under an untagged prefix, on a cluster
        raise untagged_on_cluster(where)
    if cluster:
        raise StoreConfigError(
            f"{where} holds the single-slot layout (version {text_reply(version)}); the "
            "upgrade to the sharded layout moves every key of the prefix and runs on a single "
            "Redis server: upgrade it there, or move the data to a new prefix with "
            "`harel migrate` (from ?prefix={...}: to ?shards=N)"
        )
    if shards is not None and shards != target:
        raise StoreConfigError(
            f"{where} is being upgraded to the sharded layout with {target} shards, not "
            f"{shards}: open it with ?shards={target} to finish the upgrade"
        )
    if verdict == "upgrade":
        yield from upgrade_single_slot_plan(keys, where, version)
    yield from to_sharded_plan(keys, target, floor, where, limit)
    return target


def exists_plan(keys: Keys, *, cluster: bool = False) -> Plan[bool]:
    """Whether the namespace holds a layout (``P layout``, or version 1's ``P schema``): one
    ``EXISTS``, nothing written (``open_store(url, create=False)``).  On a cluster, where the
    two keys of an untagged prefix live in two slots: one ``EXISTS`` per key (the second only
    when the first finds nothing)."""
    if not cluster:
        found = yield Command(("EXISTS", keys.layout, keys.schema))
        return int(found) > 0
    for key in (keys.layout, keys.schema):
        if int((yield Command(("EXISTS", key)))) > 0:
            return True
    return False


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


def listing_plan(
    keys: Keys, query: ListingQuery, shards: Sequence[Keys] = ()
) -> Plan[ExecutionPage]:
    """One page ordered by id: each status arm reads at most ``limit + 1`` ids after the
    cursor from its lexicographic index, the arms are merged by id in Python.  ``shards``: the
    sharded layout's shards, each read so (one script per shard) and merged the same way, so
    keyset pages stay exact."""
    if query.matches_nothing:
        return ExecutionPage()
    rows: dict[bytes, Any] = {}
    for one in shards or (keys,):
        rows.update((yield from listing_rows(one, query)))
    chosen = sorted(rows)[: query.probe_limit]
    return page_from_probe(query, [_summary(raw_id, rows[raw_id]) for raw_id in chosen])


def listing_rows(keys: Keys, query: ListingQuery) -> Plan[dict[bytes, Any]]:
    """raw id -> summary row of the ids after the cursor, at most ``limit + 1`` per index arm:
    one script."""
    statuses: Sequence[Status | None] = [None] if query.statuses is None else sorted(query.statuses)
    arms = tuple(keys.index(s, query.roots_only, query.definition_id) for s in statuses)
    low = b"-" if query.after is None else b"(" + text(query.after)
    probe = query.probe_limit
    reply = yield from run_script(LIST, (keys.summaries, *arms), (low, str(probe).encode()))
    rows: dict[bytes, Any] = {}
    for arm in reply:
        for raw_id, summary in zip(arm[::2], arm[1::2], strict=True):
            rows[raw_id] = summary
    return rows


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
    a sans-IO generator over one key prefix (``PlanStore``/``AsyncPlanStore`` drive them).

    After :meth:`open` the plan knows the namespace's layout: the single-slot one (every key
    under the prefix) or the sharded one (:attr:`shards`, :mod:`harel_store_redis._shards`),
    and routes each operation accordingly."""

    max_document_bytes = MAX_DOCUMENT_BYTES
    """Core's per-document cap (a whole request is capped by ``max_payload_bytes``)."""

    def __init__(
        self,
        keys: Keys,
        where: str,
        max_payload_bytes: int,
        *,
        cluster: bool = False,
        shards: int | None = None,
    ) -> None:
        self.keys = keys
        self.where = where
        self.max_payload_bytes = max_payload_bytes
        self.cluster = cluster
        """Whether the client is a cluster client (keys of one request must share a slot)."""
        self.requested_shards = shards
        """The ``shards`` knob: the sharded layout with that many shards for a new prefix or
        an upgrade (``None``: the single-slot layout, unless the prefix holds a sharded one)."""
        self.shards: ShardMap | None = None
        """The sharded layout's shards (``None``: the single-slot layout), set by :meth:`open`."""
        self.floor = Floor()
        """The highest seq this store object wrote or saw (sharded layout only)."""

    def open(self) -> Plan[None]:
        """Ping, cache the scripts, check (create, upgrade) the layout."""
        count = yield from open_plan(
            self.keys,
            self.where,
            cluster=self.cluster,
            shards=self.requested_shards,
            floor=self.floor,
            limit=self.max_payload_bytes,
        )
        self.shards = None if count is None else ShardMap.of(self.keys, count)

    def _home(self, execution_id: str) -> Keys:
        """The keys an execution's single-shard operations use."""
        if self.shards is None:
            return self.keys
        return home_keys(self.shards, execution_id)

    def load(self, execution_id: str) -> Plan[Execution | None]:
        """The stored execution or ``None``."""
        return load_plan(self._home(execution_id), execution_id)

    def load_for_event(
        self, execution_id: str, event_id: str
    ) -> Plan[tuple[Execution | None, bool]]:
        """``(execution, processed)`` in one call."""
        return load_for_event_plan(self._home(execution_id), execution_id, event_id)

    def commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        """One step in one script (in the execution's shard)."""
        limit = self.max_payload_bytes
        if self.shards is not None:
            return commit_sharded(
                self.shards, self.floor, prepared, trace_max, where=self.where, limit=limit
            )
        return self._single_commit(prepared, trace_max)

    def _single_commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        limit = self.max_payload_bytes
        yield from commit_plan(self.keys, prepared, trace_max, where=self.where, limit=limit)

    def enqueue(self, prepared: PreparedEnqueue) -> Plan[int]:
        """One outbox entry for the target, its work-row touch and the wake-up, in one script;
        the entry's seq."""
        limit = self.max_payload_bytes
        if self.shards is not None:
            return enqueue_sharded(self.shards, self.floor, prepared, where=self.where, limit=limit)
        return enqueue_plan(self.keys, prepared, where=self.where, limit=limit)

    def is_processed(self, execution_id: str, event_id: str) -> Plan[bool]:
        """Whether the mark exists."""
        return is_processed_plan(self._home(execution_id), execution_id, event_id)

    def pending_outbox(self, limit: int | None) -> Plan[list[OutboxEntry]]:
        """Undelivered events, oldest first."""
        if self.shards is not None:
            count = sweep_limit(limit)
            return pending_outbox_sharded(self.shards, self.floor, _count(count), count, self.where)
        return pending_outbox_plan(self.keys, limit)

    def ack_outbox(self, seq: int) -> Plan[None]:
        """Remove one outbox entry."""
        return self._ack(seq, spawns=False)

    def pending_spawns(self, limit: int | None) -> Plan[list[SpawnEntry]]:
        """Uncreated children, oldest first."""
        if self.shards is not None:
            count = sweep_limit(limit)
            return pending_spawns_sharded(self.shards, self.floor, _count(count), count, self.where)
        return pending_spawns_plan(self.keys, limit)

    def ack_spawn(self, seq: int) -> Plan[None]:
        """Remove one spawn intent."""
        return self._ack(seq, spawns=True)

    def _ack(self, seq: int, *, spawns: bool) -> Plan[None]:
        if self.shards is None:
            yield from ack_plan(self.keys, seq, spawns=spawns, where=self.where)
            return
        shard = self.shards.shard_of_seq(check_seq(seq))
        if shard is not None:  # else no shard can have written it: nothing to remove
            yield from ack_plan(self.shards.shards[shard], seq, spawns=spawns, where=self.where)

    def due_timers(self, now: float, limit: int | None) -> Plan[list[DueTimer]]:
        """Armed timers due at ``now`` (every shard's first ``limit``, merged)."""
        if self.shards is None:
            return due_timers_plan(self.keys, now, limit)
        return self._due_timers_sharded(self.shards, now, limit)

    def _due_timers_sharded(
        self, shards: ShardMap, now: float, limit: int | None
    ) -> Plan[list[DueTimer]]:
        count = sweep_limit(limit)
        due: list[DueTimer] = []
        for keys in shards.shards:
            due += yield from due_timers_plan(keys, now, count)
        due.sort(key=lambda timer: (timer[2], text(timer[0]), text(timer[1])))
        return due if count is None else due[:count]

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> Plan[None]:
        """Compare-and-delete one timer."""
        return delete_timer_plan(self._home(execution_id), execution_id, path, fire_at, self.where)

    def read_trace(self, execution_id: str) -> Plan[list[dict[str, Any]]]:
        """The retained trace steps."""
        return read_trace_plan(self._home(execution_id), execution_id)

    def append_trace(
        self, execution_id: str, entry: dict[str, Any], trace_max: int | None
    ) -> Plan[None]:
        """One step outside a commit."""
        keys = self._home(execution_id)
        return append_trace_plan(keys, execution_id, entry, trace_max, self.where)

    def list_executions(self, query: ListingQuery) -> Plan[ExecutionPage]:
        """One listing page (one script per shard)."""
        shards = () if self.shards is None else self.shards.shards
        return listing_plan(self.keys, query, shards)

    def purge(self, execution_id: str, force: bool) -> Plan[bool]:
        """Remove the execution and all it owns."""
        if self.shards is None:
            return purge_plan(self.keys, execution_id, force, self.where)
        return self._purge_sharded(self.shards, execution_id, force)

    def _purge_sharded(self, shards: ShardMap, execution_id: str, force: bool) -> Plan[bool]:
        """``purge`` in the execution's shard (``ExecutionActive`` there stops it), then the
        outbox entries targeted at it and its rows in every other shard (one script each)."""
        execution_id = check_id(execution_id)
        force = check_flag(force, "force")
        home = shards.home(execution_id)
        existed = yield from purge_plan(shards.shards[home], execution_id, force, self.where)
        for shard in shards.others(home):
            yield from purge_plan(shards.shards[shard], execution_id, True, self.where)
        return existed

    def prune_processed(self, older_than: float, batch_size: int) -> Plan[int]:
        """Drop old marks, batch by batch (shard by shard)."""
        if self.shards is None:
            return prune_plan(self.keys, older_than, batch_size, self.where)
        return self._prune_sharded(self.shards, older_than, batch_size)

    def _prune_sharded(self, shards: ShardMap, older_than: float, batch_size: int) -> Plan[int]:
        total = 0
        for keys in shards.shards:
            total += yield from prune_plan(keys, older_than, batch_size, self.where)
        return total

    def export_execution(self, execution_id: str) -> Plan[ExecutionRecord | None]:
        """Everything stored for the id (one script per shard)."""
        if self.shards is None:
            return export_plan(self.keys, execution_id)
        return export_sharded(self.shards, execution_id)

    def import_execution(self, prepared: PreparedImport) -> Plan[None]:
        """One record in one atomic script (in the execution's shard)."""
        limit = self.max_payload_bytes
        if self.shards is not None:
            return import_sharded(self.shards, self.floor, prepared, where=self.where, limit=limit)
        return self._single_import(prepared)

    def _single_import(self, prepared: PreparedImport) -> Plan[None]:
        limit = self.max_payload_bytes
        yield from import_plan(self.keys, prepared, new_token(), where=self.where, limit=limit)

    def claim(self, owner: str, now: float, lease: float, limit: int) -> Plan[list[Claim]]:
        """Lease up to ``limit`` due units, grouped (one script; sharded: per shard)."""
        if self.shards is not None:
            return claim_sharded(self.shards, self.floor, owner, now, lease, limit, self.where)
        return claim_plan(self.keys, owner, now, lease, limit, self.where)

    def renew(self, owner: str, key: str | None, now: float, lease: float) -> Plan[float]:
        """Extend an unexpired lease held by ``owner``, in one script."""
        if self.shards is not None:
            return renew_sharded(self.shards, owner, key, now, lease, self.where)
        return renew_plan(self.keys, owner, key, now, lease, self.where)

    def release(
        self, owner: str, key: str | None, retry_at: float | None, now: float
    ) -> Plan[None]:
        """Free a lease held by ``owner`` (re-dated from what is left)."""
        if self.shards is not None:
            return release_sharded(self.shards, owner, key, retry_at, now, self.where)
        return release_plan(self.keys, owner, key, retry_at, now, self.where)

    def list_leases(self, now: float, limit: int) -> Plan[list[Lease]]:
        """The leases held at ``now``, at most ``limit``: one read-only script (sharded: per
        shard, merged)."""
        if self.shards is not None:
            return leases_sharded(self.shards, now, limit, self.where)
        return leases_plan(self.keys, now, limit, self.where)
