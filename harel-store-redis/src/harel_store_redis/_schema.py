"""The key layout (schema version 1) under one prefix, and the pure schema decision.

``P`` is the prefix (default ``harel:``).  Per execution (``<id>`` = :func:`key_part`):

=================  ======  ====================================================================
key                type    content
=================  ======  ====================================================================
``P x:<id>``       hash    ``v`` version (the CAS token), ``d`` the Execution JSON, ``st``
                           status, ``c`` token of the last commit, ``tn`` next trace index,
                           ``ix`` the listing index keys it is in (newline separated)
``P tr:<id>``      list    trace ring: ``"<index> <step JSON>"``, oldest first
=================  ======  ====================================================================

Global (members of one execution share :func:`~harel_store_redis._keys.owner_prefix`):

=================  ======  ====================================================================
``P schema``       string  the layout version, :data:`SCHEMA_VERSION`
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
=================  ======  ====================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harel.model import Status
from harel.store.errors import SchemaVersionError

from harel_store_redis._keys import key_part

SCHEMA_VERSION = 1
"""The layout version this release reads and writes."""

ANY = b"*"
ROOT = b"root"


GLOBAL_KEYS = {
    "schema": b"schema",
    "summaries": b"sum",
    "owned": b"own",
    "marks": b"marks",
    "timers": b"timers",
    "timer_at": b"timer-at",
    "outbox": b"outbox",
    "spawns": b"spawns",
}
"""Attribute of :class:`Keys` -> the key's name after the prefix (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class Keys:
    """Key names under one prefix (bytes; ids already encoded).  The global keys are attributes
    (:data:`GLOBAL_KEYS`); per-execution and index keys are methods."""

    prefix: bytes
    schema: bytes = field(init=False)
    summaries: bytes = field(init=False)
    owned: bytes = field(init=False)
    marks: bytes = field(init=False)
    timers: bytes = field(init=False)
    timer_at: bytes = field(init=False)
    outbox: bytes = field(init=False)
    spawns: bytes = field(init=False)

    def __post_init__(self) -> None:
        for attribute, name in GLOBAL_KEYS.items():
            object.__setattr__(self, attribute, self.prefix + name)

    def _key(self, name: bytes) -> bytes:
        return self.prefix + name

    def execution(self, execution_id: str) -> bytes:
        """The hash of one execution."""
        return self._key(b"x:" + key_part(execution_id))

    def trace(self, execution_id: str) -> bytes:
        """The trace ring of one execution."""
        return self._key(b"tr:" + key_part(execution_id))

    def write_keys(self, execution_id: str) -> tuple[bytes, ...]:
        """``KEYS[1..9]`` of the commit and purge scripts: the execution's hash and trace, then
        the summaries, owned, marks, timers, timer-at, outbox and spawns keys."""
        return (
            self.execution(execution_id),
            self.trace(execution_id),
            self.summaries,
            self.owned,
            self.marks,
            self.timers,
            self.timer_at,
            self.outbox,
            self.spawns,
        )

    def index(self, status: Status | None, roots: bool, definition_id: str | None) -> bytes:
        """One listing index: executions with that status / root-ness / definition."""
        s = ANY if status is None else status.value.encode("ascii")
        r = ROOT if roots else ANY
        d = ANY if definition_id is None else b"=" + key_part(definition_id)
        return self._key(b"ix:" + s + b":" + r + b":" + d)

    def indexes_of(self, status: Status, is_root: bool, definition_id: str) -> tuple[bytes, ...]:
        """Every listing index an execution with these summary fields belongs to (8 or 4)."""
        keys = []
        for s in (None, status):
            for d in (None, definition_id):
                keys.append(self.index(s, False, d))
                if is_root:
                    keys.append(self.index(s, True, d))
        return tuple(keys)

    @property
    def global_keys(self) -> tuple[bytes, ...]:
        """The keys every dataset has once written to (the schema key first)."""
        return tuple(getattr(self, attribute) for attribute in GLOBAL_KEYS)


def check_schema(found: bytes | None, where: str) -> None:
    """Accept the stored layout version, or raise :class:`SchemaVersionError`.

    ``found`` is what the schema script returned: the version it found, or the one it just
    recorded in an empty namespace.
    """
    if found == str(SCHEMA_VERSION).encode():
        return
    if found is None:
        raise SchemaVersionError(
            f"{where} already holds harel keys but no layout version (a foreign or unversioned "
            "dataset under this prefix); point the store at another prefix (?prefix=...)"
        )
    shown = found[:40].decode("utf-8", "replace")
    raise SchemaVersionError(
        f"{where} holds harel Redis layout version {shown!r}, but this release of "
        f"harel-store-redis reads version {SCHEMA_VERSION}; install the release that wrote it, "
        "or point the store at another prefix (?prefix=...)"
    )
