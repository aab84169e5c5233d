"""The key layout (schema version 4) under one prefix, key names cached per execution, and the
pure schema decision.

``P`` is the prefix (default ``harel:``).  Per execution (``<id>`` = :func:`key_part`):

=================  ======  ====================================================================
key                type    content
=================  ======  ====================================================================
``P x:<id>``       hash    ``v`` version (the CAS token), ``d`` the Execution JSON, ``st``
                           status, ``tn`` next trace index, ``ix`` the listing index keys it
                           is in (newline separated), ``k0`` .. ``k7`` the receipts: ``k<n>``
                           holds the commit token that wrote the latest version ``v`` with
                           ``v % 8 == n`` (:func:`receipt_field`)
``P tr:<id>``      list    trace ring: ``"<index> <step JSON>"``, oldest first
=================  ======  ====================================================================

Global (members of one execution share :func:`~harel_store_redis._keys.owner_prefix`):

=================  ======  ====================================================================
``P layout``       hash    ``v`` the layout version (:data:`SCHEMA_VERSION`), ``by`` the release
                           that created or upgraded it (``harel-store-redis 0.1.0``)
``P schema``       string  the layout version again, as version 1 kept it: a release that reads
                           only this key refuses a newer layout naming its version
``P sum``          hash    raw id -> summary JSON (listing reads only this)
``P ix:S:R:D``     zset    listing indexes, score 0, members raw ids (lexicographic): S a status
                           or ``*``, R ``root`` or ``*``, D ``=<definition key_part>`` or ``*``
``P own``          zset    score 0: every owned member (marks, timers, targeted outbox entries,
                           spawn intents), so ``purge`` finds an execution's records by prefix
``P marks``        zset    owned mark member -> commit time (dedupe probe, age for pruning)
``P timers``       zset    owned timer member -> ``fire_at`` (sweeps read only what is due)
``P timer-at``     hash    owned timer member -> ``repr(fire_at)`` (bit-exact; Redis prints
                           ``-0.0`` as ``0``)
``P outbox``       stream  ``e`` event JSON, ``t`` target, ``o`` target's owner prefix
``P spawns``       stream  ``p`` parent, ``c`` child, ``r`` root path, ``x`` context JSON,
                           ``o`` parent's owner prefix
``P work``         hash    claims: work group member (an owner prefix, or
                           :data:`~harel_store_redis._keys.UNTARGETED`) -> ``"<priority>
                           <repr(ready_at)> <owner>"`` (owner empty: a free row)
``P ready:<p>``    zset    claims, one per priority ``p`` 0-4: work group member ->
                           ``ready_at`` (a claim reads each tier's ready rows by score)
=================  ======  ====================================================================

The untargeted outbox entries are owned members too, under the owner prefix
:data:`~harel_store_redis._keys.UNTARGETED` (``P own``), so a claim finds them as it finds an
execution's.

Layout history: version 1 kept only ``P schema`` (the version, no release); version 2 adds
``P layout`` with the release that wrote it; version 3 replaces the hash's ``c`` (the token of
the last commit only) by the receipt ring ``k0`` .. ``k7``, so a commit re-sent after up to
seven rival commits is still recognised; version 4 adds the claims' work rows (``P work``,
``P ready:<p>``) and indexes the untargeted outbox entries in ``P own``; version 5 is the
sharded layout (:mod:`harel_store_redis._shards`): these keys once per shard under
``P{<tag>}``, ``P layout`` recording the shard count (``?shards=N``; the in-place upgrade from
version 1-4: :mod:`harel_store_redis._reshard`).  Opening a version 1,
2 or 3 namespace upgrades it in place with one atomic script
(:data:`~harel_store_redis._scripts.UPGRADE`), which several processes may run at once: the
first upgrades, the others find it done.  The upgrade rewrites no execution (a layout 2 hash
gets its receipts from its next commit, until then a re-sent commit of it is a
``StoreConflict``, as before, and keeps its unused ``c`` field); it backfills the work rows of
every armed timer and pending relay entry in the same script.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harel.model import Status
from harel.store.author import RECEIPT_WINDOW, receipt_slot, release_of, schema_verdict
from harel.store.errors import SchemaVersionError

from harel_store_redis._keys import key_part, owner_prefix, text

DISTRIBUTION = "harel-store-redis"
SCHEMA_VERSION = 4
"""The single-slot layout's version, which this release reads and writes."""
SHARDED_VERSION = 5
"""The sharded layout's version (:mod:`harel_store_redis._shards`), which this release reads
and writes too (``?shards=N``)."""
UPGRADES = frozenset({1, 2, 3})
"""Older layout versions this release upgrades in place when it opens them."""

_RECEIPT_FIELDS = tuple(b"k%d" % slot for slot in range(RECEIPT_WINDOW))


def receipt_field(version: int) -> bytes:
    """The execution hash's field that holds the receipt (commit token) of ``version``: one
    of ``k0`` .. ``k7``, a ring of :data:`~harel.store.author.RECEIPT_WINDOW` slots."""
    return _RECEIPT_FIELDS[receipt_slot(version)]


ANY = b"*"
ROOT = b"root"
_CACHED_EXECUTIONS = 4096
PRIORITY_LEVELS = range(5)
"""The priorities 0-4, in the order the ready zsets are declared."""
"""How many executions' key names one :class:`Keys` remembers (then it starts afresh)."""


GLOBAL_KEYS = {
    "layout": b"layout",
    "schema": b"schema",
    "summaries": b"sum",
    "owned": b"own",
    "marks": b"marks",
    "timers": b"timers",
    "timer_at": b"timer-at",
    "outbox": b"outbox",
    "spawns": b"spawns",
    "work": b"work",
    **{f"ready_{priority}": b"ready:%d" % priority for priority in PRIORITY_LEVELS},
}
"""Attribute of :class:`Keys` -> the key's name after the prefix (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class ExecutionKeys:
    """The names one execution's operations use, built once (see :meth:`Keys.of`)."""

    raw_id: bytes
    owner: bytes
    execution: bytes
    trace: bytes
    write_keys: tuple[bytes, ...]
    """``KEYS[1..9]`` of the commit, purge and import scripts: the execution's hash and trace,
    then the summaries, owned, marks, timers, timer-at, outbox and spawns keys."""


@dataclass(frozen=True, slots=True)
class Keys:
    """Key names under one prefix (bytes; ids already encoded).  The global keys are attributes
    (:data:`GLOBAL_KEYS`); per-execution and index keys are methods, remembered per execution
    and per summary so a commit rebuilds none of them."""

    prefix: bytes
    base: bytes = b""
    """The store's own prefix when these are one shard's keys (``prefix`` is then the base with
    the shard's hash tag); empty: ``prefix`` is the store's prefix."""
    layout: bytes = field(init=False)
    schema: bytes = field(init=False)
    summaries: bytes = field(init=False)
    owned: bytes = field(init=False)
    marks: bytes = field(init=False)
    timers: bytes = field(init=False)
    timer_at: bytes = field(init=False)
    outbox: bytes = field(init=False)
    spawns: bytes = field(init=False)
    work: bytes = field(init=False)
    ready_0: bytes = field(init=False)
    ready_1: bytes = field(init=False)
    ready_2: bytes = field(init=False)
    ready_3: bytes = field(init=False)
    ready_4: bytes = field(init=False)
    work_keys: tuple[bytes, ...] = field(init=False)
    """The claims' keys in the order every script declares them: ``P work``, then
    ``P ready:0`` .. ``P ready:4``."""
    _executions: dict[str, ExecutionKeys] = field(
        init=False, default_factory=dict, repr=False, compare=False
    )
    _listings: dict[tuple[str, bool, str], tuple[tuple[bytes, ...], bytes]] = field(
        init=False, default_factory=dict, repr=False, compare=False
    )
    """:meth:`listing`'s answers by ``(status, is_root, definition_id)``: a :class:`Status`
    member and its value are one key (a ``StrEnum`` hashes and compares as its value)."""

    def __post_init__(self) -> None:
        for attribute, name in GLOBAL_KEYS.items():
            object.__setattr__(self, attribute, self.prefix + name)
        ready = tuple(getattr(self, f"ready_{priority}") for priority in PRIORITY_LEVELS)
        object.__setattr__(self, "work_keys", (self.work, *ready))

    @property
    def store_prefix(self) -> bytes:
        """The store's prefix (the wake-up channel and the layout record live under it)."""
        return self.base or self.prefix

    def _key(self, name: bytes) -> bytes:
        return self.prefix + name

    def of(self, execution_id: str) -> ExecutionKeys:
        """Every name of one execution, built on first use and then remembered."""
        found = self._executions.get(execution_id)
        if found is None:
            part = key_part(execution_id)
            execution, trace = self._key(b"x:" + part), self._key(b"tr:" + part)
            found = ExecutionKeys(
                raw_id=text(execution_id),
                owner=owner_prefix(execution_id),
                execution=execution,
                trace=trace,
                write_keys=(
                    execution,
                    trace,
                    self.summaries,
                    self.owned,
                    self.marks,
                    self.timers,
                    self.timer_at,
                    self.outbox,
                    self.spawns,
                ),
            )
            if len(self._executions) >= _CACHED_EXECUTIONS:
                self._executions.clear()
            self._executions[execution_id] = found
        return found

    def execution(self, execution_id: str) -> bytes:
        """The hash of one execution."""
        return self.of(execution_id).execution

    def trace(self, execution_id: str) -> bytes:
        """The trace ring of one execution."""
        return self.of(execution_id).trace

    def write_keys(self, execution_id: str) -> tuple[bytes, ...]:
        """``KEYS[1..9]`` of the commit, purge and import scripts (see :class:`ExecutionKeys`)."""
        return self.of(execution_id).write_keys

    def index(self, status: Status | None, roots: bool, definition_id: str | None) -> bytes:
        """One listing index: executions with that status / root-ness / definition."""
        s = ANY if status is None else status.value.encode("ascii")
        r = ROOT if roots else ANY
        d = ANY if definition_id is None else b"=" + key_part(definition_id)
        return self._key(b"ix:" + s + b":" + r + b":" + d)

    def indexes_of(self, status: Status, is_root: bool, definition_id: str) -> tuple[bytes, ...]:
        """Every listing index an execution with these summary fields belongs to (8 or 4)."""
        return self.listing(status, is_root, definition_id)[0]

    def listing(
        self, status: Status | str, is_root: bool, definition_id: str
    ) -> tuple[tuple[bytes, ...], bytes]:
        """:meth:`indexes_of` and their newline-separated form (the ``ix`` field), for a
        status given as a member or by its value (a commit's), remembered for the last
        :data:`_CACHED_EXECUTIONS` summaries."""
        found = self._listings.get((status, is_root, definition_id))
        if found is not None:
            return found
        member = Status(status)
        keys = []
        for s in (None, member):
            for d in (None, definition_id):
                keys.append(self.index(s, False, d))
                if is_root:
                    keys.append(self.index(s, True, d))
        if len(self._listings) >= _CACHED_EXECUTIONS:
            self._listings.clear()
        index_keys = tuple(keys)
        found = (index_keys, b"\n".join(index_keys))
        self._listings[(member, is_root, definition_id)] = found
        return found

    @property
    def global_keys(self) -> tuple[bytes, ...]:
        """The keys every dataset has once written to (the layout and schema keys first)."""
        return tuple(getattr(self, attribute) for attribute in GLOBAL_KEYS)


def _version(raw: bytes, where: str) -> int:
    try:
        return int(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        shown = raw[:40].decode("utf-8", "replace")
        raise SchemaVersionError(
            f"{where} holds harel Redis layout version {shown!r}, which is not a version "
            "number (something else wrote under this prefix); point the store at another "
            "prefix (?prefix=...)"
        ) from None


def layout_verdict(found: bytes | None, written_by: bytes | None, created: bool, where: str) -> str:
    """``"create"`` (the open just created the layout), ``"ready"``, ``"upgrade"`` or
    ``"sharded"`` (layout 5, :data:`SHARDED_VERSION`), else :class:`SchemaVersionError` (a
    newer or unknown layout, or harel keys without a version).

    ``found``/``written_by`` are what the layout script read (``None``: absent).
    """
    if created:
        return "create"
    if found is None:
        raise SchemaVersionError(
            f"{where} already holds harel keys but no layout version (a foreign or unversioned "
            "dataset under this prefix); point the store at another prefix (?prefix=...)"
        )
    version = _version(found, where)
    if version == SHARDED_VERSION:
        return "sharded"
    newest = SHARDED_VERSION if version > SHARDED_VERSION else SCHEMA_VERSION
    return schema_verdict(
        version,
        current=newest,
        upgrades=UPGRADES if newest == SCHEMA_VERSION else UPGRADES | {SCHEMA_VERSION},
        where=where,
        distribution=DISTRIBUTION,
        written_by=None if written_by is None else written_by.decode("utf-8", "replace"),
    )


def written_by() -> bytes:
    """What this release records as the writer of a layout it creates or upgrades."""
    return release_of(DISTRIBUTION).encode("utf-8")
