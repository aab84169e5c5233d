"""A hypothesis state machine: random operation sequences against the store and the reference.

Every rule performs the same operation on the store under test and on a fresh in-memory
:class:`~harel.store.memory.DictStore` (the reference), checks both gave the same outcome
(result, or the same error with the same attributes), and after every step the invariant
compares everything observable.  ``seq`` numbers are normalised away: order and content are
compared, never raw values, and so is ``updated_at`` (a clock value).  Each example works in
its own namespace — execution ids, event ids, processed marks — so one dataset serves all
examples of a run and an example's outcome never depends on what earlier examples left
behind (a store bug then shrinks to a counterexample instead of a flaky one).  The async
flavour is driven through an anyio blocking portal.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from harel.conformance.harness import StoreHarness
from harel.conformance.profiles import FAST, kit_settings, selected_profile_name
from harel.conformance.suite._base import (
    FAR_FUTURE,
    Flavour,
    KitBase,
    SyncAsAsync,
    declared_capabilities,
    run_inline,
)
from harel.model import Event, Execution, Status
from harel.store.contract import AsyncExecutionStore, StoreConflict, TimerOp
from harel.store.memory import DictStore

IDS = 3

OBSERVE_EVERY = 2
"""The whole observable state is compared with the reference after every OBSERVE_EVERY-th
step and once more before teardown (each comparison reads ~30 requests from the store, the
kit's largest cost on a slow server); operation results are compared after every step."""
PATHS = ("/a", "/b", "/a/inner")
FIRE_ATS = (1.0, 2.5, 0.1 + 0.2, 1700000000.123456789, 5.0, 1e-300)
PROCESSED = ("p0", "p1", "p2", "p3")
TRACE_MAXES = (0, 1, 2, 3, 5)
DEFINITIONS = ("d0", "d1")
STATUSES = (Status.PENDING, Status.RUNNING, Status.DONE, Status.FAILED)

T = TypeVar("T")


class StoreDriver:
    """Runs kit coroutines against a store: inline for sync, through a portal for async."""

    def __init__(self, store: AsyncExecutionStore, portal: BlockingPortal | None) -> None:
        self.store = store
        self.portal = portal

    def run(self, fn: Callable[[AsyncExecutionStore], Awaitable[T]]) -> T:
        """Run ``fn(store)`` to completion and return its result."""
        if self.portal is None:
            return run_inline(_call(fn, self.store))
        return self.portal.call(fn, self.store)

    def __call__(self, method: str, *args: Any, **kwargs: Any) -> Any:
        async def call(store: AsyncExecutionStore) -> Any:
            return await getattr(store, method)(*args, **kwargs)

        return self.run(call)

    def set_trace_max(self, value: int | None) -> None:
        self.store.trace_max = value


async def _call(fn: Callable[[AsyncExecutionStore], Awaitable[T]], store: AsyncExecutionStore) -> T:
    return await fn(store)


@contextmanager
def open_driver(harness: StoreHarness, flavour: Flavour) -> Iterator[StoreDriver]:
    """A driver over a store of ``flavour``; closes the store (and the portal) afterwards."""
    if flavour == "sync":
        store = SyncAsAsync(harness.open_sync())
        try:
            yield StoreDriver(store, None)
        finally:
            run_inline(store.close())
        return
    with start_blocking_portal("asyncio") as portal:
        astore = portal.call(harness.open_async)
        try:
            yield StoreDriver(astore, portal)
        finally:
            portal.call(astore.close)


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("ok", call())
    except StoreConflict as exc:
        return ("conflict", (exc.execution_id, exc.expected, exc.found))
    except Exception as exc:
        return ("error", type(exc).__name__)


class StoreMachine(RuleBasedStateMachine):
    """Differential test of one store against the reference."""

    def __init__(self, driver: StoreDriver, ordered_listing: bool) -> None:
        super().__init__()
        self.sut = driver
        self.ref = DictStore()
        self.ref_driver = StoreDriver(SyncAsAsync(self.ref), None)
        self.ordered = ordered_listing
        self.ns = f"sm{uuid.uuid4().hex[:10]}"
        self.counter = 0
        self.steps = 0
        self.trace_max: int | None = 3
        self.sut.set_trace_max(3)
        self.ref.trace_max = 3

    # -- helpers ---------------------------------------------------------------------

    def _id(self, n: int) -> str:
        return f"{self.ns}-e{n}"

    def _event(self, name: str) -> str:
        return f"{self.ns}-{name}"

    def _fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{self.ns}-{prefix}{self.counter}"

    def _stored_version(self, n: int) -> int:
        exe = self.ref.load(self._id(n))
        return 0 if exe is None else exe.version

    def _both(self, method: str, *args: Any, **kwargs: Any) -> Any:
        expected = _outcome(lambda: getattr(self.ref, method)(*args, **kwargs))
        got = _outcome(lambda: self.sut(method, *args, **kwargs))
        assert got == expected, f"{method}{args}: store gave {got}, reference {expected}"
        return expected[1]

    def _commit_both(self, exe: Execution, **effects: Any) -> None:
        ref_copy = exe.model_copy(deep=True)
        sut_copy = exe.model_copy(deep=True)
        expected = _outcome(lambda: self.ref.commit(ref_copy, **effects))
        got = _outcome(lambda: self.sut("commit", sut_copy, **effects))
        assert got == expected, f"commit of {exe.id}: store gave {got}, reference {expected}"
        assert sut_copy.version == ref_copy.version, "exe.version after commit differs"

    def _execution(
        self, n: int, version_shift: int, definition: int, status: int, payload: int
    ) -> Execution:
        version = self._stored_version(n) + version_shift
        parent = self._id(0) if n == IDS - 1 else None
        return Execution(
            id=self._id(n),
            definition_id=f"{self.ns}.{DEFINITIONS[definition]}",
            status=STATUSES[status],
            version=max(version, 0),
            parent_id=parent,
            context={"payload": payload, "tags": [payload, str(payload)]},
            active_path=f"/s{payload}",
        )

    def _mine(self, value: str | None) -> bool:
        return value is not None and value.startswith(self.ns)

    def _outbox(self, store: Callable[..., Any]) -> list[Any]:
        return [e for e in store("pending_outbox") if self._mine(e.event.id)]

    def _spawns(self, store: Callable[..., Any]) -> list[Any]:
        return [s for s in store("pending_spawns") if self._mine(s.parent_id)]

    def _ref(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.ref, method)(*args, **kwargs)

    # -- rules -----------------------------------------------------------------------

    @rule(
        n=st.integers(0, IDS - 1),
        stale=st.sampled_from([0, 0, 0, -1, 1, 2]),
        definition=st.integers(0, 1),
        status=st.integers(0, len(STATUSES) - 1),
        payload=st.integers(0, 9),
        emits=st.lists(st.tuples(st.sampled_from([None, 0, 1, 2]), st.booleans()), max_size=3),
        processed=st.none() | st.sampled_from(PROCESSED),
        timers=st.lists(
            st.tuples(st.booleans(), st.sampled_from(PATHS), st.sampled_from(FIRE_ATS)),
            max_size=4,
        ),
        spawns=st.integers(0, 2),
        trace=st.booleans(),
    )
    def commit(
        self,
        n: int,
        stale: int,
        definition: int,
        status: int,
        payload: int,
        emits: list[tuple[int | None, bool]],
        processed: str | None,
        timers: list[tuple[bool, str, float]],
        spawns: int,
        trace: bool,
    ) -> None:
        exe = self._execution(n, stale, definition, status, payload)
        emit_list = [
            (
                None if target is None else self._id(target),
                Event(id=self._fresh("ev"), kind="Tick" if flag else "Tock", data={"p": payload}),
            )
            for target, flag in emits
        ]
        timer_ops = tuple(
            TimerOp.schedule(path, fire_at) if arm else TimerOp.cancel(path)
            for arm, path, fire_at in timers
        )
        spawn_list = [
            (self._fresh("child"), f"/fork/{k}", {"k": k, "payload": payload})
            for k in range(spawns)
        ]
        step = (
            {"event_kind": "Tick", "context_out": {"payload": payload}, "index": 99}
            if trace
            else None
        )
        self._commit_both(
            exe,
            emits=emit_list,
            processed_event_id=None if processed is None else self._event(processed),
            timers=timer_ops,
            spawns=spawn_list,
            trace=step,
        )

    @rule(n=st.integers(0, IDS - 1), payload=st.integers(0, 9), stale=st.booleans())
    def save(self, n: int, payload: int, stale: bool) -> None:
        exe = self._execution(n, -1 if stale else 0, 0, 1, payload)
        if stale and exe.version == self._stored_version(n):
            exe.version += 1  # make sure it really is stale
        self._commit_both(exe, emits=[])

    @rule(index=st.integers(0, 50))
    def ack_outbox(self, index: int) -> None:
        ref_entries = self._outbox(self._ref)
        sut_entries = self._outbox(self.sut)
        if not ref_entries:
            return
        i = index % len(ref_entries)
        assert i < len(sut_entries)
        self.ref.ack_outbox(ref_entries[i].seq)
        self.sut("ack_outbox", sut_entries[i].seq)

    @rule(index=st.integers(0, 50))
    def ack_spawn(self, index: int) -> None:
        ref_entries = self._spawns(self._ref)
        sut_entries = self._spawns(self.sut)
        if not ref_entries:
            return
        i = index % len(ref_entries)
        assert i < len(sut_entries)
        self.ref.ack_spawn(ref_entries[i].seq)
        self.sut("ack_spawn", sut_entries[i].seq)

    @rule(n=st.integers(0, IDS), priority=st.integers(0, 4))
    def enqueue(self, n: int, priority: int) -> None:
        # n == IDS never exists: the entry is stored all the same (the target is not read)
        queued = Event(id=self._fresh("q"), kind="Queued", data={"n": n})
        expected = _outcome(lambda: self.ref.enqueue(self._id(n), queued, priority=priority))
        got = _outcome(lambda: self.sut("enqueue", self._id(n), queued, priority=priority))
        assert got[0] == expected[0], f"enqueue: store gave {got}, reference {expected}"

    @rule()
    def ack_unknown(self) -> None:
        self._both("ack_outbox", 2**62 + self.counter)
        self._both("ack_spawn", 2**62 + self.counter)

    @rule(n=st.integers(0, IDS - 1), path=st.sampled_from(PATHS), right=st.booleans())
    def delete_timer(self, n: int, path: str, right: bool) -> None:
        armed = [t for t in self.ref.due_timers(FAR_FUTURE) if t[:2] == (self._id(n), path)]
        fire_at = armed[0][2] if armed else 1.0
        if not right:
            fire_at = math.nextafter(fire_at, math.inf)
        self._both("delete_timer", self._id(n), path, fire_at)

    @rule(n=st.integers(0, IDS), payload=st.integers(0, 9))
    def append_trace(self, n: int, payload: int) -> None:
        # n == IDS addresses an execution that never exists: both must raise the same error
        self._both("append_trace", self._id(n), {"event_kind": "Manual", "n": payload})

    @rule(n=st.integers(0, IDS), force=st.booleans())
    def purge(self, n: int, force: bool) -> None:
        # n == IDS never exists: both must answer False
        self._both("purge", self._id(n), force=force)

    @rule()
    def prune_every_mark(self) -> None:
        # only the extremes are comparable: the two stores stamp marks with their own clocks
        self.ref.prune_processed(FAR_FUTURE)
        self.sut("prune_processed", FAR_FUTURE)

    @rule()
    def prune_no_mark(self) -> None:
        assert self._both("prune_processed", 0.0) == 0

    @rule(value=st.sampled_from(TRACE_MAXES))
    def set_trace_max(self, value: int) -> None:
        self.trace_max = value
        self.ref.trace_max = value
        self.sut.set_trace_max(value)

    @rule(
        limit=st.integers(1, 4),
        definition=st.none() | st.integers(0, 1),
        statuses=st.none() | st.lists(st.sampled_from(STATUSES), max_size=2, unique=True),
        roots_only=st.booleans(),
    )
    def list_executions(
        self,
        limit: int,
        definition: int | None,
        statuses: list[Status] | None,
        roots_only: bool,
    ) -> None:
        definitions = (
            [f"{self.ns}.{d}" for d in DEFINITIONS]
            if definition is None
            else [f"{self.ns}.{DEFINITIONS[definition]}"]
        )
        for definition_id in definitions:
            kwargs: dict[str, Any] = {
                "definition_id": definition_id,
                "status": statuses,
                "roots_only": roots_only,
                "limit": limit,
            }
            expected = self._drain(self._ref, kwargs)
            got = self._drain(self.sut, kwargs)
            if self.ordered:
                assert got == expected
            else:
                assert sorted(got) == sorted(expected)

    @staticmethod
    def _drain(store: Callable[..., Any], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        cursor = None
        for _ in range(100):
            page = store("list_executions", cursor=cursor, **kwargs)
            assert len(page.items) <= kwargs["limit"]
            out.extend(
                (item.id, item.model_dump_json(exclude={"updated_at"})) for item in page.items
            )
            cursor = page.next_cursor
            if cursor is None:
                return out
        raise AssertionError("listing did not terminate")

    # -- invariant -------------------------------------------------------------------

    def teardown(self) -> None:
        """Compare the final state with the reference (when the last step was not compared),
        then drain this example's outbox, spawns and timers so later examples read less."""
        if self.steps % OBSERVE_EVERY:
            self._compare_with_reference()
        self.sut.run(self._drain_namespace)

    async def _drain_namespace(self, store: AsyncExecutionStore) -> None:
        for entry in await store.pending_outbox():
            if self._mine(entry.event.id):
                await store.ack_outbox(entry.seq)
        for spawn in await store.pending_spawns():
            if self._mine(spawn.parent_id):
                await store.ack_spawn(spawn.seq)
        for execution_id, path, fire_at in await store.due_timers(FAR_FUTURE):
            if self._mine(execution_id):
                await store.delete_timer(execution_id, path, fire_at)

    @invariant()
    def agrees_with_reference(self) -> None:
        self.steps += 1
        if self.steps % OBSERVE_EVERY == 0:
            self._compare_with_reference()

    def _compare_with_reference(self) -> None:
        got = self.sut.run(self._observe)
        expected = self.ref_driver.run(self._observe)
        for key, value in expected.items():
            assert got[key] == value, f"{key} differs from the reference"

    async def _observe(self, store: AsyncExecutionStore) -> dict[str, Any]:
        """Everything observable about this example's namespace, seq numbers dropped."""
        seen: dict[str, Any] = {}
        for n in range(IDS + 1):
            execution_id = self._id(n)
            seen[f"load({execution_id})"] = await store.load(execution_id)
            seen[f"read_trace({execution_id})"] = await store.read_trace(execution_id)
            seen[f"is_processed({execution_id})"] = [
                await store.is_processed(execution_id, self._event(name)) for name in PROCESSED
            ]
            seen[f"load_for_event({execution_id})"] = await store.load_for_event(
                execution_id, self._event(PROCESSED[0])
            )
        seen["pending_outbox"] = [
            (e.target_id, e.event) for e in await store.pending_outbox() if self._mine(e.event.id)
        ]
        seen["pending_spawns"] = [
            (s.parent_id, s.child_id, s.root_path, s.context)
            for s in await store.pending_spawns()
            if self._mine(s.parent_id)
        ]
        seen["due_timers(all)"] = [
            t for t in await store.due_timers(FAR_FUTURE) if self._mine(t[0])
        ]
        seen["due_timers(2.5)"] = [t for t in await store.due_timers(2.5) if self._mine(t[0])]
        return seen


def _settings_for(harness: StoreHarness) -> settings:
    """The kit's settings, capped at the harness's ``fast_stateful_examples`` under the fast
    profile."""
    chosen = kit_settings()
    cap = type(harness).fast_stateful_examples
    if cap is not None and selected_profile_name() == FAST and chosen.max_examples > cap:
        return settings(chosen, max_examples=cap)
    return chosen


class StatefulTests(KitBase):
    """Random operation sequences agree with the in-memory reference."""

    def test_random_operations_agree_with_reference(
        self, harel_harness: StoreHarness, flavour: Flavour
    ) -> None:
        caps = declared_capabilities(type(harel_harness))
        ordered = bool(caps and caps.ordered_listing)
        with open_driver(harel_harness, flavour) as driver:

            class BoundMachine(StoreMachine):
                def __init__(self) -> None:
                    super().__init__(driver, ordered)

            run_state_machine_as_test(BoundMachine, settings=_settings_for(harel_harness))
