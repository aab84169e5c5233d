"""The runner's orchestration, written once and free of IO (engine.md §2, §5.3).

Every operation is a generator that yields :data:`Request` objects and receives their
replies: :class:`StoreCall` (call a store method), :class:`CallAction` (call a user action)
and :class:`ReadClock`.  A store or action exception is thrown back into the generator at
the ``yield``.  :mod:`harel.engine.runner` answers with plain calls, :mod:`harel.engine.aio`
with awaits, so the sync and async runners cannot drift apart.

Poison never stops the relay or the timer sweep: each outbox entry, spawn entry and due
timer is one unit of work.  A unit that fails with anything but ``StoreConflict`` (left for
later) or ``StoreUnavailable`` (raised: the store is down, the caller backs off) is logged
and retried on later passes; after ``quarantine_after`` failed attempts it is quarantined:
recorded as a dead letter (:mod:`harel.engine.deadletters`) and acked (a timer deleted), and
the pass carries on with the rest.  A sweep read that fails (``pending_outbox`` raising on a
record it cannot decode) is logged and skipped for this pass, so the other sweeps still run.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from typing import Any, Generic, TypeVar

from harel.engine import core
from harel.engine.actions import ActionContext, resolve_action
from harel.engine.copies import DEFAULT_KEEP, CommittedCopies, independent_copy
from harel.engine.deadletters import (
    DEAD_LETTERS_ID,
    DeadLetter,
    error_text,
    small_data,
    with_letter,
)
from harel.engine.definition import Definition
from harel.engine.effects import (
    CancelTimer,
    EmitEvent,
    RunAction,
    RunChooser,
    ScheduleTimer,
    SpawnChildren,
)
from harel.model import Event, Execution, Status
from harel.store.common.claims import damage_of
from harel.store.contract import (
    AsyncExecutionStore,
    Claim,
    Emit,
    ExecutionStore,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)
from harel.store.errors import (
    AlreadyProcessed,
    CommitOutcomeUnknown,
    ExecutionAlreadyExists,
    ExecutionNotFound,
    LeaseLost,
    StoreConfigError,
    StoreConflict,
    StoreCorrupted,
    StoreUnavailable,
)

log = logging.getLogger("harel.engine")

COMMIT_RESENDS = 2
"""How many times the runner re-sends a commit whose outcome came back unknown."""

RETRY_LEFT_AFTER = 1.0
"""Default seconds a claimed group whose unit was left for later (a conflict, an unknown
definition, a failed attempt) waits before it is claimable again (``retry_after``)."""

T = TypeVar("T")
S = TypeVar("S", ExecutionStore, AsyncExecutionStore)
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class StoreCall:
    """Call ``store.<method>(*args, **kwargs)`` and send back its result."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CallAction:
    """Call the user action ``fn(stm, event, **inputs)`` (sync or async); reply ignored."""

    fn: Callable[..., Any]
    stm: ActionContext
    event: Event | None
    inputs: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReadClock:
    """Send back the runner's ``clock()``."""


Request = StoreCall | CallAction | ReadClock
Plan = Generator[Request, Any, T]


@dataclass
class WorkDone:
    """What one :meth:`RunnerPlan.work` call did: groups claimed, units relayed (spawns and
    outbox entries) and timers fired (quarantined units counted apart)."""

    groups: int = 0
    relayed: int = 0
    fired: int = 0
    quarantined: int = 0

    @property
    def units(self) -> int:
        """Every unit finished (done or quarantined)."""
        return self.relayed + self.fired + self.quarantined

    def count(self, kind: str, outcome: str) -> None:
        """Count one finished unit of ``kind`` (``spawn``/``outbox``/``timer``)."""
        if outcome == "quarantined":
            self.quarantined += 1
        elif kind == "timer":
            self.fired += 1
        else:
            self.relayed += 1


class UnknownDefinition(KeyError):
    """The runner has no definition registered under this id; the message lists known ids."""

    def __init__(self, definition_id: str, known: Mapping[str, Definition]) -> None:
        self.definition_id = definition_id
        names = ", ".join(repr(name) for name in sorted(known)) or "none"
        super().__init__(
            f"unknown definition {definition_id!r}; this runner knows: {names} "
            "(pass it in the runner's definitions mapping)"
        )

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass
class Collected:
    """What driving one step produced: the commit payload and the trace labels."""

    emits: list[Emit] = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)
    spawns: list[Spawn] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)


class Acked(Enum):
    """The answer of a unit of work whose own commit acked it (see :data:`ACKED`)."""

    ACKED = "acked"


ACKED = Acked.ACKED
"""What a unit's work answers when its step's commit already removed the unit (a fired timer
disarmed in the step's own commit): done, and no separate ack is written."""


def disarm_fired(exe: Execution, got: Collected, path: str, fire_at: object) -> bool:
    """Make the step's commit remove the fired timer ``(path, fire_at)``; whether it does.

    A step whose own timer ops touch ``path`` (the state was left, or left and re-entered)
    already removes or replaces the row.  Otherwise, when ``exe`` still records exactly that
    arming, a ``cancel`` of ``path`` joins the commit (and the record drops it): the fired
    timer is gone with the step, in the same write.  A ``Timeout`` for an earlier arming
    (stale), or an execution with no record of the arming, keeps the separate
    ``delete_timer`` (which removes the row only while it holds ``fire_at``).
    """
    if any(op.path == path for op in got.timers):
        return True
    if isinstance(fire_at, bool) or not isinstance(fire_at, int | float):
        return False
    if exe.armed_timers.get(path) != fire_at:
        return False
    got.timers.append(TimerOp.cancel(path))
    del exe.armed_timers[path]
    return True


class RunnerPlan:
    """The IO-free durable-runner logic shared by both shells.

    ``definitions`` maps definition ids to :class:`Definition`; ``trace`` turns trace steps on;
    ``conflict_retries`` bounds the reload-and-retry of ``process`` on ``StoreConflict``;
    ``quarantine_after`` is how many failed attempts a relay entry or timer gets before it
    becomes a dead letter.  Failure counts live in this object (per process).
    """

    def __init__(
        self,
        definitions: Mapping[str, Definition],
        *,
        trace: bool,
        conflict_retries: int,
        quarantine_after: int = 3,
        retry_after: float = RETRY_LEFT_AFTER,
        keep_copies: int = DEFAULT_KEEP,
    ) -> None:
        if conflict_retries < 0:
            raise ValueError(f"conflict_retries must be >= 0, got {conflict_retries!r}")
        if quarantine_after < 1:
            raise ValueError(f"quarantine_after must be >= 1, got {quarantine_after!r}")
        self.definitions = definitions
        self.trace = trace
        self.conflict_retries = conflict_retries
        self.quarantine_after = quarantine_after
        if not retry_after >= 0:
            raise ValueError(f"retry_after must be >= 0 seconds, got {retry_after!r}")
        self.retry_after = retry_after
        """Seconds a claimed group with a unit left for later waits before its next claim."""
        self.copies = CommittedCopies(keep_copies)
        """The executions as this runner last committed them: the next event for one of them
        starts from its copy, with no read before the commit (:mod:`harel.engine.copies`)."""
        self.failures: dict[str, int] = {}
        """Failed attempts per unit (``outbox:SEQ``, ``spawn:SEQ``, ``timer:ID:PATH@AT``)."""
        self.skipped: set[str] = set()
        """Units this process gave up on without acking them (their ack or record failed)."""
        self.quarantined = 0
        """Units quarantined by this plan since it was created."""
        self.attempts = 0
        """Failed attempts counted since creation (``run_until_idle`` uses it as progress)."""
        self.errors = 0
        """Failed sweep reads, acks and dead-letter records since creation."""
        self.conflicts = 0
        """Deliveries refused with ``StoreConflict`` (another writer stepped first) since
        creation: wasted attempts, with :attr:`repeats`."""
        self.repeats = 0
        """Deliveries found already done (the event's dedupe mark was set) since creation."""
        self.interrupted: Callable[[], bool] = lambda: False
        """Checked between units of work: a worker asked to stop ends its pass early (each
        unit is atomic, so stopping between two is safe)."""

    def definition(self, definition_id: str) -> Definition:
        """The registered definition, or :class:`UnknownDefinition` naming the known ids."""
        try:
            return self.definitions[definition_id]
        except KeyError:
            raise UnknownDefinition(definition_id, self.definitions) from None

    # -- one step ---------------------------------------------------------------------------

    def drive(self, exe: Execution, steps: Generator[Any, Any, Any]) -> Plan[Collected]:
        """Run the pure engine's generator to its end, answering its effects.

        An action error stops the engine, marks ``exe`` FAILED and drops emits/timers/spawns.
        """
        out = Collected()
        number = 0
        reply: Any = None
        armed = dict(exe.armed_timers)  # restored when the step fails (its timers are dropped)
        while True:
            try:
                effect = steps.send(reply)
            except StopIteration:
                return out
            except core.EngineError as err:
                exe.armed_timers = armed
                self._fail(exe, out, err)
                return out
            reply = None
            if isinstance(effect, RunAction | RunChooser):
                key = f"{exe.id}:{exe.version}:{number}"
                number += 1
                try:
                    if isinstance(effect, RunChooser):
                        out.labels.append(effect.chooser.label)
                        reply = core.choose(effect.chooser, exe)
                    else:
                        out.labels.append(effect.action.label)
                        stm = ActionContext(exe.id, exe.context, key, out.emits)
                        fn = resolve_action(effect.action.target)
                        yield CallAction(fn, stm, effect.event, dict(effect.action.inputs))
                except Exception as err:
                    steps.close()
                    exe.armed_timers = armed
                    self._fail(exe, out, err)
                    return out
            elif isinstance(effect, EmitEvent):
                out.emits.append((effect.to, effect.event))
            elif isinstance(effect, SpawnChildren):
                out.spawns.extend(effect.children)
            elif isinstance(effect, ScheduleTimer):
                now = yield ReadClock()
                fire_at = float(now + effect.delay)
                out.timers.append(TimerOp.schedule(effect.path, fire_at))
                exe.armed_timers[effect.path] = fire_at
            elif isinstance(effect, CancelTimer):
                out.timers.append(TimerOp.cancel(effect.path))
                exe.armed_timers.pop(effect.path, None)
            else:
                raise TypeError(f"the engine yielded an unknown effect {effect!r}")

    @staticmethod
    def _fail(exe: Execution, out: Collected, err: Exception) -> None:
        """The dead letter: FAILED with the error, nothing emitted, armed or spawned."""
        exe.status = Status.FAILED
        exe.error = f"{type(err).__name__}: {err}"
        out.emits.clear()
        out.timers.clear()
        out.spawns.clear()

    def commit(
        self, exe: Execution, got: Collected, event: Event | None, from_path: str | None
    ) -> Plan[None]:
        """Write one step: snapshot, emits, dedupe id, timers, spawns and the trace step."""
        trace = None
        if self.trace:
            trace = {
                "event_kind": "Start" if event is None else event.kind,
                "event_data": {} if event is None else copy.deepcopy(event.data),
                "from_path": from_path,
                "to_path": exe.active_path,
                "actions": list(got.labels),
                "context_out": copy.deepcopy(exe.context),
                "timestamp": (yield ReadClock()),
            }
        yield from self.send_commit(self.commit_call(exe, got, event, trace))

    @staticmethod
    def commit_call(
        exe: Execution, got: Collected, event: Event | None, trace: dict[str, Any] | None
    ) -> StoreCall:
        """The ``commit`` request of one step (what is empty is left to the store's defaults)."""
        kwargs: dict[str, Any] = {"processed_event_id": None if event is None else event.id}
        if got.timers:
            kwargs["timers"] = got.timers
        if got.spawns:
            kwargs["spawns"] = got.spawns
        if trace is not None:
            kwargs["trace"] = trace
        return StoreCall("commit", (exe, got.emits), kwargs)

    def send_commit(self, call: StoreCall) -> Plan[None]:
        """Send one commit; after ``CommitOutcomeUnknown`` send the very same commit again (the
        same execution object and arguments: the store recognises it by its token and answers
        as the original would), up to :data:`COMMIT_RESENDS` times.  A re-send that finds
        another writer's commit raises ``StoreConflict`` (the step was not stored); one that
        still cannot settle it re-raises ``CommitOutcomeUnknown``."""
        for resend in range(COMMIT_RESENDS + 1):
            try:
                yield call
                self.copies.put(call.args[0])  # stored: the next step may start from it
                return
            except CommitOutcomeUnknown as err:
                if resend == COMMIT_RESENDS:
                    raise
                log.warning("commit outcome unknown, re-sending it to settle: %s", error_text(err))

    def step(self, exe: Execution, event: Event) -> Plan[bool]:
        """Deliver ``event`` to the loaded ``exe``: drive ``process`` and commit (may conflict).

        Returns whether the step wrote relay work (an outbox entry or a spawn intent)."""
        wrote_relays, _ = yield from self.fire_step(exe, event, None)
        return wrote_relays

    def fire_step(self, exe: Execution, event: Event, fired: str | None) -> Plan[tuple[bool, bool]]:
        """:meth:`step`, where ``fired`` is the path of the timer whose ``Timeout`` ``event``
        is (``None``: any other event): the commit carries that timer's removal when the step
        left it armed (:func:`disarm_fired`).  Returns whether the step wrote relay work and
        whether its commit removed or replaced the fired timer's row."""
        defn = self.definition(exe.definition_id)
        from_path = exe.active_path
        got = yield from self.drive(exe, core.process(defn, exe, event))
        took = fired is not None and disarm_fired(exe, got, fired, event.data.get("fire_at"))
        if self.trace:
            yield from self.commit(exe, got, event, from_path)
        else:
            yield from self.send_commit(self.commit_call(exe, got, event, None))  # untraced
        return bool(got.emits or got.spawns), took

    def start(self, exe: Execution) -> Plan[bool]:
        """Drive ``start`` on a new execution and insert it (``StoreConflict`` if it exists).

        Returns whether the step wrote relay work (an outbox entry or a spawn intent)."""
        got = yield from self.drive(exe, core.start(self.definition(exe.definition_id), exe))
        yield from self.commit(exe, got, None, None)
        return bool(got.emits or got.spawns)

    # -- public operations ------------------------------------------------------------------

    def create(
        self,
        definition_id: str,
        context: Mapping[str, Any] | None,
        execution_id: str | None,
        priority: int,
        relay: bool = True,
    ) -> Plan[Execution]:
        """engine.md §2.2: pre-check, start, insert, relay, return the committed copy."""
        self.definition(definition_id)
        fields: dict[str, Any] = {"definition_id": definition_id, "priority": priority}
        if execution_id is not None:
            fields["id"] = execution_id
        exe = Execution(context=dict(context or {}), **fields)
        try:
            wrote_relays = yield from self.start(exe)  # the insert's CAS refuses a taken id
        except StoreConflict:
            raise ExecutionAlreadyExists(exe.id) from None
        if not wrote_relays:
            return independent_copy(exe)  # exactly the stored copy: nothing to relay
        return (yield from self.settle(exe, exe.id, relay))

    def settle(self, committed: Execution, execution_id: str, relay: bool) -> Plan[Execution]:
        """After a commit that wrote relay work: relay and reload, never raising (the commit
        stands whatever happens).

        A relay or reload failure is logged; the relay is finished later (by ``recover``, a
        worker or the next call) and ``committed`` is returned when the reload fails.  A step
        that wrote no relay work skips this: relay work other steps left pending is the
        worker's sweep's (or ``recover``'s), and the committed copy is returned as it is.
        """
        if relay:
            try:
                yield from self.relay()
            except Exception as err:
                log.warning("relay after committing %s deferred: %s", execution_id, error_text(err))
        try:
            return (yield from self.load(execution_id))
        except Exception as err:
            log.warning("reload of %s after its commit failed: %s", execution_id, error_text(err))
            return committed

    def process(self, execution_id: str, event: Event, relay: bool = True) -> Plan[Execution]:
        """engine.md §2.3: dedupe, pick targets (broadcast to live regions), commit each, relay.

        An execution this runner committed last starts from its kept copy: the commit alone
        checks the dedupe mark and the version (one round trip when the step writes no relay
        work); otherwise the execution is loaded with its dedupe mark first."""
        exe = self.kept(execution_id, event)
        kept = exe is not None
        if exe is None:
            found: tuple[Execution | None, bool] = yield StoreCall(
                "load_for_event", (execution_id, event.id)
            )
            exe, seen = found
            if exe is None:
                raise ExecutionNotFound(execution_id)
            if seen:
                self.repeats += 1
                return exe
        if not exe.children or not core.is_domain_event(event):
            # What ``targets`` answers without a store call: the execution itself.
            stored, wrote = yield from self.deliver(exe, event, kept)
            if stored is None:  # another writer processed the event (or removed the row)
                return (yield from self.load(execution_id))
            if not wrote:
                return independent_copy(stored)  # the stored copy: nothing to relay
            return (yield from self.settle(exe, execution_id, relay))
        targets = yield from self.targets(exe, event)
        wrote_relays = False
        committed: Execution | None = None
        for target in targets:
            committed, wrote = yield from self.deliver(target, event)
            wrote_relays = wrote_relays or wrote
        only_itself = len(targets) == 1 and targets[0] is exe  # not a broadcast to regions
        if only_itself and committed is not None and not wrote_relays:
            return independent_copy(committed)  # the stored copy: nothing to relay
        return (yield from self.settle(exe, execution_id, relay))

    def kept(self, execution_id: str | None, event: Event) -> Execution | None:
        """Take this runner's committed copy of ``execution_id`` for a step with ``event``, or
        ``None`` (nothing kept, or a domain event for an execution with region children:
        picking its targets needs the stored rows, so it is loaded)."""
        if execution_id is None:
            return None
        exe = self.copies.take(execution_id)
        if exe is not None and exe.children and core.is_domain_event(event):
            self.copies.put(exe)
            return None
        return exe

    def on_kept(
        self, execution_id: str | None, work: Callable[[Execution], Plan[R]]
    ) -> Plan[R | bool | None]:
        """Run ``work`` (a step) on this runner's kept copy of ``execution_id`` and return
        what it returns; ``True`` when the commit found the event already processed (nothing
        written); ``None`` when no copy is kept or it was out of date (``StoreConflict``: the
        caller loads the execution and goes on as without a copy)."""
        kept = self.copies.take(execution_id) if execution_id is not None else None
        if kept is None:
            return None
        try:
            return (yield from work(kept))
        except AlreadyProcessed:
            self.repeats += 1
            return True
        except StoreConflict:
            log.debug("kept copy of %s is out of date, reloading", execution_id)
            return None

    def enqueue(self, execution_id: str, event: Event, priority: int) -> Plan[int]:
        """Hand ``event`` to the fleet for ``execution_id``: one outbox entry, written in one
        store write (the store's ``enqueue``), that a worker delivers like an emitted event
        (exactly once per ``event.id``); the entry's seq.  A ``StoreUnavailable`` leaves the
        outcome open: enqueue the same event again (a duplicate is delivered once)."""
        seq: int = yield StoreCall("enqueue", (execution_id, event), {"priority": priority})
        return seq

    def targets(self, exe: Execution, event: Event) -> Plan[list[Execution]]:
        """The rows ``event`` goes to: the live region children for a domain event, else ``exe``.

        Regions receive domain events only while the parent is parked at their fork (a parent
        that left the orthogonal state early gets its events itself).  An event that a region
        of the current fork already processed was a broadcast: a re-send never falls through
        to the parent, it only reaches the regions that missed it.  Missing child rows trigger
        the spawn relay first.
        """
        if not exe.children or not core.is_domain_event(event):
            return [exe]
        parked = any(
            not child.finished and child.root_path.rpartition(".")[0] == exe.active_path
            for child in exe.children.values()
        )
        live = [cid for cid, child in exe.children.items() if parked and not child.finished]
        rows: list[tuple[Execution | None, bool]] = []
        for attempt in range(2):
            rows = []
            for cid in live:
                rows.append((yield StoreCall("load_for_event", (cid, event.id))))
            if attempt == 0 and any(row is None for row, _ in rows):
                yield from self.spawn_pass()
                continue
            break
        broadcast_before = any(seen for row, seen in rows if row is not None)
        for cid, child in exe.children.items():
            if broadcast_before:
                break
            if child.finished or not parked:
                broadcast_before = yield StoreCall("is_processed", (cid, event.id))
        pending = [row for row, seen in rows if row is not None and not seen]
        if pending or broadcast_before:
            return pending
        return [exe]

    def deliver(
        self, exe: Execution, event: Event, kept: bool = False
    ) -> Plan[tuple[Execution | None, bool]]:
        """Step ``exe`` with ``event``, reloading and re-driving on ``StoreConflict`` (§2.7).

        Returns the execution as committed (``None`` when another writer processed the event
        or removed the row meanwhile) and whether the step wrote relay work.  ``kept``: ``exe``
        is this runner's kept copy, whose first conflict is a stale copy (reloaded without
        counting as a conflict retry).
        """
        attempt = 0
        while True:
            try:
                wrote_relays = yield from self.step(exe, event)
                return exe, wrote_relays
            except AlreadyProcessed:
                self.repeats += 1  # the commit found the event's dedupe mark: nothing written
                return None, False
            except StoreConflict:
                if kept:
                    kept = False
                    log.debug("kept copy of %s is out of date, reloading", exe.id)
                else:
                    self.conflicts += 1
                    attempt += 1
                    if attempt > self.conflict_retries:
                        raise
                    log.info("conflict on %s, reloading (attempt %d)", exe.id, attempt)
                fresh, seen = yield StoreCall("load_for_event", (exe.id, event.id))
                if seen:
                    self.repeats += 1
                if fresh is None or seen:
                    return None, False
                exe = fresh

    def load(self, execution_id: str) -> Plan[Execution]:
        """The committed copy, or :class:`ExecutionNotFound`."""
        exe = yield StoreCall("load", (execution_id,))
        if exe is None:
            raise ExecutionNotFound(execution_id)
        return exe  # type: ignore[no-any-return]

    # -- relay and timers -------------------------------------------------------------------

    def relay(self) -> Plan[int]:
        """engine.md §2.5: spawn pass then outbox pass until a pass acks nothing; total acked.

        Raises only ``StoreUnavailable``; every other failure is contained per entry.
        """
        total = 0
        while True:
            acked = yield from self.spawn_pass()
            acked += yield from self.outbox_pass()
            if not acked:
                return total
            total += acked

    def sweep(self, method: str, *args: Any, **kwargs: Any) -> Plan[list[Any]]:
        """Read pending work (``pending_spawns``/``pending_outbox``/``due_timers``).

        A store that cannot read it (anything but ``StoreUnavailable``) is logged and the pass
        gets nothing, so one undecodable record does not stop the other sweeps.
        """
        try:
            found = yield StoreCall(method, args, kwargs)
        except StoreUnavailable:
            raise
        except Exception as err:
            self.errors += 1
            log.error("%s failed, skipping this pass: %s", method, error_text(err))
            return []
        return list(found)

    def finish(self, ref: str, ack: StoreCall) -> Plan[bool]:
        """Ack a unit (``ack_outbox``/``ack_spawn``/``delete_timer``); False if that failed."""
        try:
            yield ack
        except StoreUnavailable:
            raise
        except Exception as err:
            log.error("cannot ack %s, leaving it to the operator: %s", ref, error_text(err))
            self.errors += 1
            self.skipped.add(ref)
            return False
        self.failures.pop(ref, None)
        return True

    def failed(self, ref: str, letter: DeadLetter, err: Exception) -> Plan[bool]:
        """Count a failed attempt of unit ``ref``; at ``quarantine_after`` attempts record
        ``letter`` as a dead letter and return True (the caller acks the unit)."""
        attempts = self.failures.get(ref, 0) + 1
        self.failures[ref] = attempts
        self.attempts += 1
        text = error_text(err)
        if attempts < self.quarantine_after:
            log.warning(
                "%s failed (attempt %d of %d), retrying later: %s",
                ref,
                attempts,
                self.quarantine_after,
                text,
            )
            return False
        now = yield ReadClock()
        data, note = small_data(letter.event_data)
        letter = DeadLetter(
            ref=ref,
            target_id=letter.target_id,
            event_kind=letter.event_kind,
            event_id=letter.event_id,
            error=text,
            attempts=attempts,
            at=now,
            event_data=data,
            note=note,
        )
        try:
            yield from self.record(letter)
        except StoreUnavailable:
            raise
        except Exception as record_err:
            log.error(
                "%s failed %d times (%s) and cannot be recorded as a dead letter (%s); "
                "this process leaves it alone",
                ref,
                attempts,
                text,
                error_text(record_err),
            )
            self.errors += 1
            self.skipped.add(ref)
            return False
        self.quarantined += 1
        log.error("%s quarantined as a dead letter after %d attempts: %s", ref, attempts, text)
        return True

    def record(self, letter: DeadLetter) -> Plan[None]:
        """Append ``letter`` to the dead-letter record (CAS, retried on conflict)."""
        for attempt in range(self.conflict_retries + 5):
            book = yield StoreCall("load", (DEAD_LETTERS_ID,))
            try:
                yield StoreCall("commit", (with_letter(book, letter), []))
                return
            except StoreConflict:
                log.info("dead-letter record busy, retrying (attempt %d)", attempt + 1)
        raise StoreConflict(DEAD_LETTERS_ID, -1, None)

    def unit(
        self, ref: str, work: Plan[bool | Acked], letter: DeadLetter, ack: StoreCall
    ) -> Plan[str]:
        """Run one unit of work and ack it when done (not when the work answers
        :data:`ACKED`: its own commit acked it): ``"done"``, ``"quarantined"`` (failed
        ``quarantine_after`` times: recorded as ``letter`` and acked), ``"left"`` (for a later
        pass) or ``"skipped"`` (this process gave up on it, or a stop was asked for)."""
        if self.interrupted() or ref in self.skipped:
            return "skipped"
        try:
            done = yield from work
            outcome = "done"
        except StoreUnavailable:
            raise
        except Exception as err:
            done = yield from self.failed(ref, letter, err)
            outcome = "quarantined"
        if not done:
            return "left"
        if done is ACKED:
            self.failures.pop(ref, None)
            return outcome
        return outcome if (yield from self.finish(ref, ack)) else "skipped"

    def spawn_pass(self) -> Plan[int]:
        """Create every pending child (idempotently) and ack its spawn row; count acked rows."""
        acked = 0
        for entry in (yield from self.sweep("pending_spawns")):
            ref = f"spawn:{entry.seq}"
            letter = DeadLetter(ref, entry.child_id, "Start", None, "", 0, 0.0, entry.context)
            ack = StoreCall("ack_spawn", (entry.seq,))
            outcome = yield from self.unit(ref, self.spawn_one(entry), letter, ack)
            acked += outcome in ("done", "quarantined")
        return acked

    def spawn_one(self, entry: SpawnEntry) -> Plan[bool]:
        """Start the child of one spawn entry; whether the entry is done (to be acked)."""
        damage = damage_of(entry)
        if damage is not None:  # its stored record does not decode: a failed attempt
            raise StoreCorrupted(f"spawn intent {entry.seq}: {damage}")
        if (yield StoreCall("load", (entry.child_id,))) is not None:
            return True
        parent = yield StoreCall("load", (entry.parent_id,))
        if parent is None:
            log.warning("spawn %s dropped: parent %r is gone", entry.seq, entry.parent_id)
            return True
        if parent.definition_id not in self.definitions:
            log.warning("spawn %s left: unknown definition %r", entry.seq, parent.definition_id)
            return False
        child = Execution(
            id=entry.child_id,
            child_id=entry.child_id,
            parent_id=entry.parent_id,
            root_path=entry.root_path,
            context=dict(entry.context),
            definition_id=parent.definition_id,
            priority=parent.priority,
        )
        try:
            yield from self.start(child)
        except StoreConflict:
            log.info("child %s was created by another relay", entry.child_id)
        return True

    def outbox_pass(self) -> Plan[int]:
        """Deliver every pending outbox event once and ack it; count acked rows."""
        acked = 0
        for entry in (yield from self.sweep("pending_outbox")):
            ref, event = f"outbox:{entry.seq}", entry.event
            letter = DeadLetter(ref, entry.target_id, event.kind, event.id, "", 0, 0.0, event.data)
            ack = StoreCall("ack_outbox", (entry.seq,))
            outcome = yield from self.unit(ref, self.deliver_entry(entry), letter, ack)
            acked += outcome in ("done", "quarantined")
        return acked

    def deliver_entry(self, entry: OutboxEntry) -> Plan[bool]:
        """Deliver one outbox entry; whether it is done (to be acked) or left for later."""
        damage = damage_of(entry)
        if damage is not None:  # its stored record does not decode: a failed attempt
            raise StoreCorrupted(f"outbox entry {entry.seq}: {damage}")
        stepped = yield from self.on_kept(entry.target_id, lambda exe: self.step(exe, entry.event))
        if stepped is not None:  # stepped from the kept copy (or found already processed)
            return True
        target, seen = None, False
        if entry.target_id is not None:
            target, seen = yield StoreCall("load_for_event", (entry.target_id, entry.event.id))
        if target is None:
            log.warning("outbox %s dropped: no target %r", entry.seq, entry.target_id)
            return True
        if target.definition_id not in self.definitions:
            log.warning("outbox %s left: unknown definition %r", entry.seq, target.definition_id)
            return False
        if seen:
            self.repeats += 1
            return True
        try:
            yield from self.step(target, entry.event)
        except AlreadyProcessed:
            self.repeats += 1
        except StoreConflict:
            self.conflicts += 1
            log.info("outbox %s left for later: conflict on %s", entry.seq, target.id)
            return False
        return True

    def fire_due_timers(self) -> Plan[int]:
        """engine.md §2.6: deliver each due ``Timeout`` (sequentially), then delete its row.

        Returns how many timers were fired (a quarantined timer is deleted but not counted).
        """
        now = yield ReadClock()
        fired = 0
        for execution_id, path, fire_at in sorted(
            (yield from self.sweep("due_timers", now)), key=lambda item: item[2]
        ):
            ref = f"timer:{execution_id}:{path}@{fire_at!r}"
            event = core.timeout_event(execution_id, path, fire_at)
            letter = DeadLetter(ref, execution_id, event.kind, event.id, "", 0, 0.0, event.data)
            ack = StoreCall("delete_timer", (execution_id, path, fire_at))
            work = self.fire_one(execution_id, path, event)
            fired += (yield from self.unit(ref, work, letter, ack)) == "done"
        return fired

    # -- claims -------------------------------------------------------------------------------

    def work(self, owner: str, lease: float, limit: int) -> Plan[WorkDone]:
        """Claim up to ``limit`` due units under ``owner`` and do them, group by group, each
        group released when done.

        A stop asked for meanwhile releases the groups not started yet (and the rest of the
        one in progress) without working on them.  Raises only ``StoreUnavailable``.
        """
        now = yield ReadClock()
        claims: list[Claim] = yield StoreCall(
            "claim", (owner, now), {"lease": lease, "limit": limit}
        )
        done = WorkDone(groups=len(claims))
        for claim in claims:
            yield from self.work_claim(owner, claim, lease, done)
        return done

    def work_claim(self, owner: str, claim: Claim, lease: float, done: WorkDone) -> Plan[None]:
        """Do one claim's units in the contract's order (spawns, outbox in ``seq`` order,
        timers), renewing the lease when half of it is spent, then release it — postponed by
        ``retry_after`` seconds when a unit was left for later.  An outbox entry left for later
        holds back the group's later entries (one execution's events stay in order).  Counts
        what was done (quarantined units included) into ``done``."""
        left, expires = False, claim.expires_at
        for kind, ref, work, letter, ack in self._claim_units(claim):
            if left and kind == "outbox":
                continue
            now = yield ReadClock()
            if self.interrupted():
                break
            if now >= expires - lease / 2:
                try:
                    expires = yield StoreCall(
                        "renew", (owner, claim.execution_id, now), {"lease": lease}
                    )
                except LeaseLost as err:
                    log.warning("stopping work on a claim: %s", err)
                    return
            outcome = yield from self.unit(ref, work, letter, ack)
            if outcome in ("done", "quarantined"):
                done.count(kind, outcome)
            elif not self.interrupted():  # left for later, or given up by this process
                left = True
        now = yield ReadClock()
        retry_at = now + self.retry_after if left else None
        try:
            yield StoreCall("release", (owner, claim.execution_id), {"retry_at": retry_at})
        except LeaseLost as err:
            log.info("claim already gone at release: %s", err)

    def _claim_units(
        self, claim: Claim
    ) -> list[tuple[str, str, Plan[bool | Acked], DeadLetter, StoreCall]]:
        """``(kind, ref, work, letter, ack)`` for each unit of ``claim``, in order."""
        units: list[tuple[str, str, Plan[bool | Acked], DeadLetter, StoreCall]] = []
        for spawn in claim.spawns:
            letter = DeadLetter(
                f"spawn:{spawn.seq}", spawn.child_id, "Start", None, "", 0, 0.0, spawn.context
            )
            ack = StoreCall("ack_spawn", (spawn.seq,))
            units.append(("spawn", letter.ref, self.spawn_one(spawn), letter, ack))
        for entry in claim.outbox:
            event = entry.event
            ref = f"outbox:{entry.seq}"
            letter = DeadLetter(ref, entry.target_id, event.kind, event.id, "", 0, 0.0, event.data)
            ack = StoreCall("ack_outbox", (entry.seq,))
            units.append(("outbox", ref, self.deliver_entry(entry), letter, ack))
        execution_id = claim.execution_id
        if execution_id is None:  # the untargeted outbox entries: no timers
            return units
        for path, fire_at in claim.timers:
            ref = f"timer:{execution_id}:{path}@{fire_at!r}"
            event = core.timeout_event(execution_id, path, fire_at)
            letter = DeadLetter(ref, execution_id, event.kind, event.id, "", 0, 0.0, event.data)
            ack = StoreCall("delete_timer", (execution_id, path, fire_at))
            work = self.fire_one(execution_id, path, event, relay=False)
            units.append(("timer", ref, work, letter, ack))
        return units

    def fire_one(
        self, execution_id: str, path: str, event: Event, relay: bool = True
    ) -> Plan[bool | Acked]:
        """Deliver one due timer's ``Timeout``; whether it is done (to be deleted), or
        :data:`ACKED` when the step's own commit removed the timer (one write per fired timer).
        With ``relay`` the relay work the step wrote is relayed at once (claiming workers leave
        it to the claims)."""
        done = yield from self.on_kept(
            execution_id, partial(self._fire, path=path, event=event, relay=relay)
        )
        if done is not None:
            return done
        exe, seen = yield StoreCall("load_for_event", (execution_id, event.id))
        if exe is not None and exe.definition_id not in self.definitions:
            log.warning(
                "timer %s/%s left: unknown definition %r", execution_id, path, exe.definition_id
            )
            return False
        if exe is not None and seen:
            self.repeats += 1
        if exe is None or seen:
            return True
        try:
            return (yield from self._fire(exe, path, event, relay))
        except AlreadyProcessed:
            self.repeats += 1
            return True
        except StoreConflict:
            self.conflicts += 1
            log.info("timer %s/%s left for later: conflict", execution_id, path)
            return False

    def _fire(self, exe: Execution, path: str, event: Event, relay: bool) -> Plan[bool | Acked]:
        """Step ``exe`` with its due ``Timeout`` and relay what it wrote when asked to."""
        wrote_relays, took = yield from self.fire_step(exe, event, path)
        if wrote_relays and relay:
            yield from self.relay()
        return ACKED if took else True

    def is_idle(self) -> Plan[bool]:
        """Whether no spawn and no outbox entry is pending."""
        spawns = yield StoreCall("pending_spawns", (), {"limit": 1})
        outbox = yield StoreCall("pending_outbox", (), {"limit": 1})
        return not spawns and not outbox

    def run_until_idle(self, max_rounds: int) -> Plan[int]:
        """Relay and sweep until a round fires nothing and nothing is pending; timers fired.

        A failing entry counts as progress until it is quarantined.  Raises ``RuntimeError``
        when entries stay pending without progress (e.g. their definition is not registered
        here) or after ``max_rounds`` busy rounds.
        """
        fired = 0
        for _ in range(max_rounds):
            attempts, quarantined = self.attempts, self.quarantined
            relayed = yield from self.relay()
            now_fired = yield from self.fire_due_timers()
            fired += now_fired
            if not now_fired and (yield from self.is_idle()):
                return fired
            progress = self.attempts != attempts or self.quarantined != quarantined
            if not now_fired and not relayed and not progress:
                raise RuntimeError(
                    "spawn/outbox entries stay pending and none can be delivered: is their "
                    f"definition registered? (known: {sorted(self.definitions)})"
                )
        raise RuntimeError(f"still busy after {max_rounds} rounds (timers keep firing?)")


class RunnerShell(Generic[S]):
    """What both runner shells hold: the store, the definitions, the clock and the plan.

    ``trace_max``, when given, is applied to ``store.trace_max``; ``quarantine_after`` is how
    many failed attempts a relay entry or due timer gets before it becomes a dead letter;
    ``retry_after`` how long a claimed group with a unit left for later waits (``work``);
    ``keep_copies`` how many committed executions the runner keeps to step from without a
    read (``0``: load before every step).
    """

    def __init__(
        self,
        store: S,
        definitions: Mapping[str, Definition],
        *,
        clock: Callable[[], float] = time.time,
        trace: bool = False,
        trace_max: int | None = None,
        conflict_retries: int = 3,
        quarantine_after: int = 3,
        retry_after: float = RETRY_LEFT_AFTER,
        keep_copies: int = DEFAULT_KEEP,
    ) -> None:
        self.store: S = store
        self.definitions = definitions
        self.clock = clock
        self.plan = RunnerPlan(
            definitions,
            trace=trace,
            conflict_retries=conflict_retries,
            quarantine_after=quarantine_after,
            retry_after=retry_after,
            keep_copies=keep_copies,
        )
        if trace_max is not None:
            store.trace_max = trace_max

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.store!r}, definitions={sorted(self.definitions)})"

    def _can_enqueue(self) -> None:
        """Refuse, naming the fix, a store that predates the contract's ``enqueue``."""
        if not callable(getattr(self.store, "enqueue", None)):
            raise StoreConfigError(
                f"{type(self.store).__name__} has no enqueue() (it predates the contract's "
                "enqueue): deliver the event with process(), or upgrade the store's package"
            )
