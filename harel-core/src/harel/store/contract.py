"""The ``ExecutionStore`` contract, sync and async, with its value types and errors.

Semantics every store must honour (the conformance kit pins each one):

* ``load`` returns a fresh copy; mutating it never changes the store.
* ``commit`` is all or nothing.  CAS: a record at ``exe.version`` is overwritten at
  ``exe.version + 1``; no record and ``exe.version == 0`` inserts at version 1; anything else
  raises :class:`StoreConflict` (``found`` is the stored version, ``None`` when absent).  On
  success ``exe.version`` is the new version; on any error it is restored, and the error says
  what happened to the step:

  - :class:`CommitOutcomeUnknown` (a :class:`StoreUnavailable`): the request may have reached
    the server and no answer came back; the step may or may not be stored.  Raised only then.
  - every other error (``StoreConflict``, plain ``StoreUnavailable``, the validation errors,
    ``StoreCorrupted`` …): nothing of the step was written, and nothing of it becomes visible
    later.
* Commit tokens and receipts: every commit carries a token (:attr:`PreparedCommit.token
  <harel.store.author.PreparedCommit>`), kept for the same ``Execution`` object while it is
  re-sent at the same ``expected`` version with the same arguments, and fresh otherwise (so
  byte-identical commits from two loaded copies still race: one wins).  A store keeps the
  *receipt* — the token that wrote version ``v`` — for at least the last
  :data:`~harel.store.author.RECEIPT_WINDOW` versions of each execution.  A commit whose CAS
  misses but whose token is the receipt of the version it writes was already stored: it answers
  success (``exe.version`` bumped) and writes nothing again.  So re-sending the same commit after
  ``CommitOutcomeUnknown`` settles it, even when other writers committed in between (up to the
  window; past it the resend raises ``StoreConflict``: reload and check the dedupe mark).
* Dedupe in the commit: a commit whose ``processed_event_id`` the execution has already
  recorded (its dedupe mark is stored) raises :class:`AlreadyProcessed` (a ``StoreConflict``)
  and writes nothing — no snapshot, emit, timer op, spawn, trace step or receipt — whatever
  its version; only a re-send of that very stored commit answers success instead.  So
  effect-once needs no read before the write: a runner may step from the copy it stored.
* The fence of a stored copy: a commit of an ``Execution`` object whose own last successful
  commit stored version ``v`` (and that is committed again from ``v``) carries that commit's
  token (:attr:`PreparedCommit.base <harel.store.author.PreparedCommit>`); the store applies it
  only while the stored version is ``v`` *and* the receipt of ``v`` is still that token.  A
  copy of an execution that was purged and re-created (or imported) up to the same version is
  refused with ``StoreConflict`` (``found == expected``).  Copies from ``load`` carry no fence:
  their version alone decides.
* Seqs: every outbox entry and spawn intent gets a ``seq``, unique in the store and never
  reused, its ack token.  Seqs increase in commit order: from a commit to any commit that
  starts after it returned.  A store with one serialisation point (SQLite, libSQL, rqlite,
  PostgreSQL, single-slot Redis) gives that exactly.  One without it (sharded Redis, MongoDB,
  DynamoDB: seqs from a clock per writer, no store-wide counter on the commit path) gives it
  within one store object always and between writers whose clocks agree to better than one
  round trip; sharded Redis and MongoDB also order a writer's writes after every entry it read,
  and MongoDB one execution's entries after its earlier ones, whatever the clocks say.  Gaps
  are allowed (a refused commit's seqs are never used).
* Timer ops are collapsed to the last op per path before they are applied.
* ``due_timers`` is ascending by ``(fire_at, execution_id, path)`` and ``fire_at`` round-trips
  bit-exactly; ``delete_timer`` removes a timer only while it still holds exactly ``fire_at``.
* Trace indices are contiguous per execution (0, 1, 2, ...), a caller-supplied ``index`` is
  ignored, and the ring keeps the last ``trace_max`` steps after every write (falsy = no limit).
* Listing is ordered by id, holds at most ``limit`` items, and never returns a non-null cursor
  after the last page; a foreign cursor raises :class:`InvalidCursor`, ``limit < 1`` raises
  ``ValueError``, an empty ``status`` collection matches nothing.
* Retention: ``purge(id)`` removes, in one atomic write, the execution and everything that
  belongs to it (its dedupe marks, timers, the outbox entries targeted at it, the spawn intents
  it wrote, its trace) and returns whether the execution was stored; it refuses an execution that
  is not finished (``PENDING``, ``RUNNING``, ``SUSPENDED``, ``CANCELLING``) with
  :class:`ExecutionActive` unless ``force=True``.  ``prune_processed(older_than)`` drops the
  dedupe marks recorded before epoch second ``older_than`` in bounded batches (each its own
  short write) and returns how many it dropped; a mark recorded at or after ``older_than`` is
  never dropped.  Marks must outlive every redelivery of their event: pick ``older_than`` below
  the oldest moment an event could still be redelivered.
* Claims (what a fleet of workers splits the work with): ``claim(owner, now, lease=, limit=)``
  takes, in one atomic step, up to ``limit`` units of due work — due timers (``fire_at <=
  now``), outbox entries and spawn intents — *grouped by execution* (:class:`Claim`: the
  timers of one execution, the outbox entries targeted at it, the spawn intents it wrote; the
  untargeted outbox entries form the group ``execution_id=None``) and leases each group to
  ``owner`` until ``now + lease``.  While a lease holds (``now < expires_at``) no claim returns
  that group's work, not even to its owner; ``renew`` extends it, ``release`` gives it back
  (optionally not before ``retry_at``), and an expired lease is claimable again, so a killed
  worker's work is taken over after one lease, never lost.  A relay unit is due at once, whatever
  clock the claimer passes as ``now``; groups with relay work go before groups that are only
  due by the clock, in write order (within a priority); a group's outbox entries come in ``seq``
  order, its spawn intents in ``seq`` order, its timers by ``(fire_at, path)``, and a claim that
  runs out of ``limit`` cuts a group in that order (spawns, outbox, timers), the rest waiting for
  the next claim.  Groups are claimed highest priority first, oldest first within a priority,
  where a priority level is worth :data:`PRIORITY_AGING` seconds of waiting (rank ``due -
  PRIORITY_AGING * priority``): of two groups of the same kind (relay, or timers only) neither
  waits more than ``4 * PRIORITY_AGING`` seconds behind the other's higher priority.  A group's
  priority is its execution's (set by its own commits; a group first created by another
  execution's emit takes the emitter's priority until then).  Fencing:
  the version CAS decides, the lease does not — commits never check leases.  A worker whose
  lease expired and was taken over can still commit only at the version it loaded: if the new
  owner committed first, the CAS fails; if it commits first, the new owner's CAS fails, it
  reloads and finds the dedupe mark.  Either way each unit takes effect once.  ``renew`` and
  ``release`` by anyone but the holder, and ``renew`` of an expired lease, raise
  :class:`LeaseLost`; a lease whose execution was purged is gone (``LeaseLost`` too).  A zero or
  negative lease, a ``limit`` below 1 and an empty owner raise :class:`InvalidArgument` /
  ``InvalidIdentifier`` before anything is read.  Every claim reads a bounded set (at most five
  bounded index reads of ``limit`` rows).
  ``list_leases(now, limit=)`` returns the leases held at ``now`` (:class:`Lease`): groups a
  ``claim`` leased (or ``renew`` extended) whose ``expires_at > now``, not released, whose
  execution was not purged; an expired lease is not listed (even if nobody claimed it since).
  They are ordered by ``(expires_at, execution_id)``, the ``None`` group first among equal
  expiries, at most ``limit`` of them.  It is read-only: it writes nothing, takes no lock and
  never changes a lease.  ``limit < 1`` (or a bool / non-int limit) raises
  :class:`InvalidArgument` before anything is read, and so does a non-finite ``now`` (the
  argument checks ``claim`` uses).  What it reads is bounded: the store's work index (the
  rows/keys/items claims already use), never a scan of every execution.  The monitor uses it
  to show "which worker holds which lease and until when".
  Optional capability, wake-ups: a store that can push a signal has ``wait_for_work(timeout)``
  (``async`` on an async store; a worker checks ``hasattr`` and polls without it).  It blocks
  up to ``timeout`` seconds (``0 <= timeout <= 3600``, else :class:`InvalidArgument`) until a
  commit or import that touched work rows, or a ``release`` that left work, may have made work
  ready (``True``), else returns ``False``; it never raises on timeout.  A spurious ``True`` is
  allowed, a missed signal is not: the first call listens and may return ``True`` at once (for
  what was written before it listened), and no signal sent after that is lost between calls.
  A lost listening connection raises :class:`StoreUnavailable` and the next call listens again;
  ``close()`` ends a wait in progress; a cancelled async wait leaves nothing held.  Shared
  rules: ``harel.store.common.wakeups`` (PostgreSQL ``LISTEN/NOTIFY``, Redis pub/sub).
* Enqueue (a producer hands an event to the fleet without running the step):
  ``enqueue(target_id, event, *, priority=0)`` writes one outbox entry targeted at
  ``target_id``, and nothing else, in one atomic write, and returns its ``seq``.  The entry is
  relay work like an emitted event: ``pending_outbox`` lists it, it joins the target's claim
  group (due at once), it wakes waiting workers, ``purge`` of the target drops it and the
  target's record carries it; it is ordered after every entry written before ``enqueue``
  returned.  ``priority`` (0-4) is the priority the target's group takes when the enqueue
  creates it (the target's own commits set it from then on).  The store does not read the
  target: an entry for an execution that is not stored is dropped by the relay, like any emit.
  The target id and the event are checked like an emit's (``InvalidIdentifier``,
  ``InvalidPayload``, ``PayloadTooLarge``; a bad ``priority``: ``InvalidArgument``) before
  anything is written.  A :class:`StoreUnavailable` from ``enqueue`` leaves the outcome open
  (the entry may be stored): re-send it — a second entry for the same event is delivered once
  (the target's dedupe mark for ``event.id``); every other error means nothing was written.
* Records: ``export_execution(id)`` returns, from one consistent read, everything the store
  holds for the id as an :class:`ExecutionRecord` (``None`` when it holds nothing);
  ``import_execution(record)`` writes such a record in one atomic write, keeping the
  execution's version, the marks' times, the timers, the relays' order and the trace indices
  (the ring keeps the last ``trace_max`` steps), and raises :class:`ExecutionAlreadyExists`
  with nothing written when the execution is already stored.  Importing what another store
  exported and exporting it again gives a record with the same digest.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Self, runtime_checkable

from harel.model import Event, Execution, ExecutionPage, Status
from harel.store.errors import (
    AlreadyProcessed,
    CommitOutcomeUnknown,
    ExecutionActive,
    ExecutionAlreadyExists,
    ExecutionNotFound,
    InvalidArgument,
    InvalidCursor,
    InvalidPayload,
    InvalidStoreURL,
    LeaseLost,
    PayloadTooLarge,
    SchemaVersionError,
    StoreConflict,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
)

DEFAULT_TRACE_MAX = 200
"""Default number of trace steps a store retains per execution."""

DEFAULT_PRUNE_BATCH = 1000
"""Default number of dedupe marks ``prune_processed`` drops per write."""

FINISHED = frozenset({Status.DONE, Status.CANCELLED, Status.FAILED})
"""The statuses ``purge`` accepts without ``force``."""

PRIORITY_AGING = 60.0
"""Seconds of waiting one priority level is worth in the claim order (see ``claim``)."""

DEFAULT_LEASE = 30.0
"""The lease (seconds) a worker asks for by default."""

TimerAction = Literal["schedule", "cancel"]


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """An undelivered event; ``seq`` (the ack token) increases in commit order (the
    module docstring's *Seqs* rule)."""

    seq: int
    target_id: str | None
    event: Event


@dataclass(frozen=True, slots=True)
class SpawnEntry:
    """An intent to create a child execution, written by the parent's commit."""

    seq: int
    parent_id: str
    child_id: str
    root_path: str
    context: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """The due work of one execution (``None``: the untargeted outbox entries) that a claim
    leased to ``owner`` until ``expires_at``.

    ``timers`` are due ``(path, fire_at)`` pairs by ``(fire_at, path)``; ``outbox`` the entries
    targeted at the execution and ``spawns`` the intents it wrote, each in ``seq`` order.
    """

    execution_id: str | None
    owner: str
    expires_at: float
    priority: int = 0
    timers: tuple[tuple[str, float], ...] = ()
    outbox: tuple[OutboxEntry, ...] = ()
    spawns: tuple[SpawnEntry, ...] = ()

    @property
    def units(self) -> int:
        """How many units of work the claim holds."""
        return len(self.timers) + len(self.outbox) + len(self.spawns)


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """A group of due work that ``owner`` holds until ``expires_at`` (see ``list_leases``).

    ``execution_id`` is ``None`` for the untargeted outbox entries' group.
    """

    execution_id: str | None
    owner: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class TimerOp:
    """Arm (``schedule``) or disarm (``cancel``) the timer of one state path.

    ``fire_at`` is epoch seconds, normalised to ``float`` so it round-trips bit-exactly.
    """

    action: TimerAction
    path: str
    fire_at: float = 0.0

    def __post_init__(self) -> None:
        if self.action not in ("schedule", "cancel"):
            raise ValueError(f"TimerOp.action must be 'schedule' or 'cancel', got {self.action!r}")
        if not isinstance(self.path, str):
            raise TypeError(f"TimerOp.path must be a str, got {type(self.path).__name__}")
        if isinstance(self.fire_at, bool) or not isinstance(self.fire_at, (int, float)):
            raise TypeError(f"TimerOp.fire_at must be a number, got {self.fire_at!r}")
        fire_at = float(self.fire_at)
        if not math.isfinite(fire_at):
            raise ValueError(f"TimerOp.fire_at must be finite, got {self.fire_at!r}")
        object.__setattr__(self, "fire_at", fire_at)

    @classmethod
    def schedule(cls, path: str, fire_at: float) -> TimerOp:
        """Arm ``path`` to fire at ``fire_at`` (replacing any earlier time)."""
        return cls("schedule", path, fire_at)

    @classmethod
    def cancel(cls, path: str) -> TimerOp:
        """Disarm ``path`` (a no-op when it is not armed)."""
        return cls("cancel", path)


Emit = tuple[str | None, Event]
"""``(target_id, event)``; a ``None`` target is untargeted."""

Spawn = tuple[str, str, dict[str, Any]]
"""``(child_id, root_path, context)``."""

DueTimer = tuple[str, str, float]
"""``(execution_id, path, fire_at)``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionRecord:
    """Everything a store holds for one execution id: what ``harel migrate`` moves.

    * ``execution`` — the stored snapshot (``None`` when only relays target the id, e.g. an
      event emitted to a child whose spawn intent is still pending);
    * ``updated_at`` — the summary's ``updated_at`` (epoch seconds, ``None`` when unknown);
    * ``processed`` — dedupe marks ``(event_id, recorded_at)``, sorted by event id;
    * ``timers`` — armed timers ``(path, fire_at)``, sorted by path;
    * ``outbox`` — pending outbox entries targeted at the id, in ``seq`` order;
    * ``spawns`` — pending spawn intents the execution wrote, in ``seq`` order;
    * ``trace`` — the retained trace steps (each with its ``index``), oldest first.

    ``seq`` values are the source store's ack tokens: a destination assigns its own, keeping
    their order.  :func:`harel.store.common.record_digest` hashes a record without them.
    """

    execution_id: str
    execution: Execution | None
    updated_at: float | None = None
    processed: tuple[tuple[str, float], ...] = ()
    timers: tuple[tuple[str, float], ...] = ()
    outbox: tuple[OutboxEntry, ...] = ()
    spawns: tuple[SpawnEntry, ...] = ()
    trace: tuple[dict[str, Any], ...] = ()

    @property
    def is_empty(self) -> bool:
        """True when the store holds nothing at all for the id."""
        return self.execution is None and not (
            self.processed or self.timers or self.outbox or self.spawns or self.trace
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """What a backend promises beyond the core contract.  Every flag must be declared.

    * ``persistent`` — data survives the process (a new process sees it).
    * ``multi_process`` — several processes may write through one store's data safely.
    * ``ordered_listing`` — ``list_executions`` pages are ordered by id.
    * ``exact_pages`` — every page but the last holds exactly ``limit`` items.
    """

    persistent: bool
    multi_process: bool
    ordered_listing: bool
    exact_pages: bool

    def as_dict(self) -> dict[str, bool]:
        """The flags by name (for listings and JSON output)."""
        return {
            "persistent": self.persistent,
            "multi_process": self.multi_process,
            "ordered_listing": self.ordered_listing,
            "exact_pages": self.exact_pages,
        }


@runtime_checkable
class ExecutionStore(Protocol):
    """The synchronous store contract (see the module docstring for the semantics)."""

    trace_max: int | None

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self: ...

    def load(self, execution_id: str) -> Execution | None: ...

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]: ...

    def save(self, exe: Execution) -> None: ...

    def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Sequence[TimerOp] = (),
        spawns: Sequence[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None: ...

    def is_processed(self, execution_id: str, event_id: str) -> bool: ...

    def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]: ...

    def ack_outbox(self, seq: int) -> None: ...

    def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]: ...

    def ack_spawn(self, seq: int) -> None: ...

    def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]: ...

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None: ...

    def claim(
        self, owner: str, now: float, *, lease: float = DEFAULT_LEASE, limit: int = 100
    ) -> list[Claim]: ...

    def renew(
        self, owner: str, execution_id: str | None, now: float, *, lease: float = DEFAULT_LEASE
    ) -> float: ...

    def release(
        self, owner: str, execution_id: str | None, *, retry_at: float | None = None
    ) -> None: ...

    def list_leases(self, now: float, *, limit: int = 100) -> list[Lease]: ...

    def enqueue(self, target_id: str, event: Event, *, priority: int = 0) -> int: ...

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]: ...

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None: ...

    def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage: ...

    def purge(self, execution_id: str, *, force: bool = False) -> bool: ...

    def prune_processed(
        self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH
    ) -> int: ...

    def export_execution(self, execution_id: str) -> ExecutionRecord | None: ...

    def import_execution(self, record: ExecutionRecord) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncExecutionStore(Protocol):
    """The asynchronous twin of :class:`ExecutionStore`: same methods, as coroutines."""

    trace_max: int | None

    @classmethod
    async def from_url(cls, url: str, **knobs: Any) -> Self: ...

    async def load(self, execution_id: str) -> Execution | None: ...

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]: ...

    async def save(self, exe: Execution) -> None: ...

    async def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Sequence[TimerOp] = (),
        spawns: Sequence[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None: ...

    async def is_processed(self, execution_id: str, event_id: str) -> bool: ...

    async def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]: ...

    async def ack_outbox(self, seq: int) -> None: ...

    async def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]: ...

    async def ack_spawn(self, seq: int) -> None: ...

    async def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]: ...

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None: ...

    async def claim(
        self, owner: str, now: float, *, lease: float = DEFAULT_LEASE, limit: int = 100
    ) -> list[Claim]: ...

    async def renew(
        self, owner: str, execution_id: str | None, now: float, *, lease: float = DEFAULT_LEASE
    ) -> float: ...

    async def release(
        self, owner: str, execution_id: str | None, *, retry_at: float | None = None
    ) -> None: ...

    async def list_leases(self, now: float, *, limit: int = 100) -> list[Lease]: ...

    async def enqueue(self, target_id: str, event: Event, *, priority: int = 0) -> int: ...

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]: ...

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None: ...

    async def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage: ...

    async def purge(self, execution_id: str, *, force: bool = False) -> bool: ...

    async def prune_processed(
        self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH
    ) -> int: ...

    async def export_execution(self, execution_id: str) -> ExecutionRecord | None: ...

    async def import_execution(self, record: ExecutionRecord) -> None: ...

    async def close(self) -> None: ...


__all__ = [
    "DEFAULT_LEASE",
    "DEFAULT_PRUNE_BATCH",
    "DEFAULT_TRACE_MAX",
    "FINISHED",
    "PRIORITY_AGING",
    "AlreadyProcessed",
    "AsyncExecutionStore",
    "Capabilities",
    "Claim",
    "CommitOutcomeUnknown",
    "DueTimer",
    "Emit",
    "ExecutionActive",
    "ExecutionAlreadyExists",
    "ExecutionNotFound",
    "ExecutionRecord",
    "ExecutionStore",
    "InvalidArgument",
    "InvalidCursor",
    "InvalidPayload",
    "InvalidStoreURL",
    "Lease",
    "LeaseLost",
    "OutboxEntry",
    "PayloadTooLarge",
    "SchemaVersionError",
    "Spawn",
    "SpawnEntry",
    "StoreConflict",
    "StoreCorrupted",
    "StoreError",
    "StoreUnavailable",
    "TimerAction",
    "TimerOp",
]
