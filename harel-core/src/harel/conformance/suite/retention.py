"""Retention: ``purge`` leaves nothing of an execution behind, ``prune_processed`` keeps every
mark inside the window, and ``updated_at`` stamps every commit.

What "nothing behind" means is read straight from the storage through the harness's
``footprint(execution_id)`` (not through the contract), so a purge that forgets one table is
caught even when no contract method would show the leftover.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import Any

import pytest

from harel.conformance.suite._base import (
    FAR_FUTURE,
    SMOKE,
    Kit,
    KitBase,
    event,
    new_exe,
    step,
)
from harel.model import Execution, Status
from harel.store.contract import FINISHED, AsyncExecutionStore, StoreConflict, TimerOp
from harel.store.errors import ExecutionActive, StoreError

TARGET = "kit-gone"
PEER = "kit-kept"
RECORDS_WRITTEN = 11
"""What :func:`_populate` stores for one execution: the execution, 2 marks, 2 timers, the
outbox entry its peer targets at it, 2 spawn intents it wrote, 3 trace steps."""

UNFINISHED = tuple(status for status in Status if status not in FINISHED)
ODD_IDS = ("k%", "k_", "kx", "k\\", "k*", "k?", "k[", "k{", "k:", "k", "k:x", "K")
"""Ids a LIKE, GLOB, regex, prefix, case-insensitive or ``:``-joined key would confuse."""
PRUNE_TOLERANCE = 1e-3
"""How far (seconds) ``updated_at`` may sit outside the commit call (stores keeping ms)."""


async def _populate(
    store: AsyncExecutionStore, execution_id: str, peer: str, status: Status = Status.DONE
) -> Execution:
    """Give ``execution_id`` one record of every kind (see :data:`RECORDS_WRITTEN`).

    It also emits to ``peer`` and broadcasts (those entries are not its own: they stay), and
    spawns a child whose id is ``peer`` (an intent ``peer`` did not write: it goes with it).
    """
    exe = new_exe(execution_id, status=Status.RUNNING, context={"owner": execution_id})
    await store.commit(
        exe,
        [(peer, event(f"{execution_id}>peer")), (None, event(f"{execution_id}>all"))],
        processed_event_id=f"{execution_id}-in-1",
        timers=(TimerOp.schedule("/a", 10.0), TimerOp.schedule("/b", 20.0)),
        spawns=[(f"{execution_id}-child", "/r", {"n": 1}), (peer, "/r", {"n": 2})],
        trace=step("Start"),
    )
    exe.status = status
    await store.commit(exe, [], processed_event_id=f"{execution_id}-in-2", trace=step("Go"))
    await store.append_trace(execution_id, step("Manual"))
    return exe


async def _pair(store: AsyncExecutionStore, status: Status = Status.DONE) -> None:
    """:data:`TARGET` and :data:`PEER`, each populated, each emitting to the other."""
    await _populate(store, TARGET, PEER, status)
    await _populate(store, PEER, TARGET)


async def _view(store: AsyncExecutionStore, execution_id: str, gone: str) -> dict[str, Any]:
    """What ``execution_id`` owns, read through the contract, ignoring what ``gone`` owns."""
    loaded = await store.load(execution_id)
    events = [f"{execution_id}-in-1", f"{execution_id}-in-2", f"{gone}-in-1"]
    return {
        "execution": None if loaded is None else loaded.model_dump_json(),
        "trace": await store.read_trace(execution_id),
        "marks": [await store.is_processed(execution_id, ev) for ev in events],
        "outbox": [
            (e.target_id, e.event.id) for e in await store.pending_outbox() if e.target_id != gone
        ],
        "spawns": [
            (s.parent_id, s.child_id) for s in await store.pending_spawns() if s.parent_id != gone
        ],
        "timers": [t for t in await store.due_timers(FAR_FUTURE) if t[0] != gone],
        "listed": [s.id for s in (await store.list_executions(limit=1000)).items if s.id != gone],
    }


async def _assert_gone(kit: Kit, execution_id: str) -> None:
    """Nothing of ``execution_id`` is stored or visible through any read."""
    leftover = kit.harness.footprint(execution_id)
    assert leftover == [], f"purge({execution_id!r}) left records behind: {leftover}"
    store = kit.store
    assert await store.load(execution_id) is None
    assert await store.read_trace(execution_id) == []
    for ev in (f"{execution_id}-in-1", f"{execution_id}-in-2"):
        assert await store.is_processed(execution_id, ev) is False
        assert await store.load_for_event(execution_id, ev) == (None, False)
    assert [t for t in await store.due_timers(FAR_FUTURE) if t[0] == execution_id] == []
    assert [e for e in await store.pending_outbox() if e.target_id == execution_id] == []
    assert [s for s in await store.pending_spawns() if s.parent_id == execution_id] == []
    listed = await store.list_executions(limit=1000)
    assert execution_id not in [s.id for s in listed.items]


def _sorted(labels: Iterable[str]) -> list[str]:
    return sorted(labels)


async def _updated_at(store: AsyncExecutionStore, execution_id: str) -> float:
    """The ``updated_at`` of one execution's summary (paging through the listing)."""
    cursor: str | None = None
    while True:
        page = await store.list_executions(limit=100, cursor=cursor)
        for summary in page.items:
            if summary.id == execution_id:
                assert isinstance(summary.updated_at, float), (
                    f"summary of {execution_id!r} has updated_at={summary.updated_at!r}; "
                    "store PreparedCommit.committed_at with the execution and list it"
                )
                return summary.updated_at
        cursor = page.next_cursor
        if cursor is None:
            pytest.fail(f"{execution_id!r} is not listed")


def _after(moment: float) -> None:
    """Return once this process's clock reads strictly later than ``moment``."""
    while time.time() <= moment:
        time.sleep(0)


async def _aged_marks(kit: Kit, plan: list[tuple[str, int]]) -> dict[tuple[str, str], float]:
    """Commit ``count`` marks per execution, one commit each; every mark's recorded age.

    The clock is let past each commit's ``updated_at`` before the next commit, so ages are
    strictly increasing and every threshold below is exact.
    """
    ages: dict[tuple[str, str], float] = {}
    last = 0.0
    for execution_id, count in plan:
        exe = new_exe(execution_id)
        for n in range(count):
            _after(last)
            await kit.store.commit(exe, [], processed_event_id=f"{execution_id}-m{n}")
            last = await _updated_at(kit.store, execution_id)
            ages[(execution_id, f"{execution_id}-m{n}")] = last
    return ages


async def _marked(store: AsyncExecutionStore, keys: Iterable[tuple[str, str]]) -> set[Any]:
    return {key for key in keys if await store.is_processed(*key)}


class RetentionTests(KitBase):
    """``purge``, ``prune_processed`` and ``updated_at``."""

    # -- purge -----------------------------------------------------------------------------

    @SMOKE
    async def test_purge_removes_everything_it_owns(self, kit: Kit) -> None:
        store = kit.store
        await _pair(store)
        owned = kit.harness.footprint(TARGET)
        assert all(isinstance(label, str) for label in owned), owned
        assert len(owned) >= RECORDS_WRITTEN, (
            f"footprint({TARGET!r}) lists {owned}; it must name every record stored for the id "
            f"(at least {RECORDS_WRITTEN} here: the execution, 2 marks, 2 timers, 1 outbox "
            "entry targeted at it, 2 spawn intents it wrote, 3 trace steps)"
        )
        peer_records = _sorted(kit.harness.footprint(PEER))
        peer_before = await _view(store, PEER, TARGET)

        assert await store.purge(TARGET) is True
        await _assert_gone(kit, TARGET)
        assert _sorted(kit.harness.footprint(PEER)) == peer_records
        assert await _view(store, PEER, TARGET) == peer_before
        # what it emitted for others is theirs: still pending
        pending = {(e.target_id, e.event.id) for e in await store.pending_outbox()}
        assert {(PEER, f"{TARGET}>peer"), (None, f"{TARGET}>all")} <= pending
        # and another store over the dataset sees the same
        other = await kit.open()
        assert await other.load(TARGET) is None
        assert await other.purge(TARGET) is False

    @pytest.mark.parametrize("status", list(Status))
    async def test_purge_refuses_unfinished_unless_forced(self, kit: Kit, status: Status) -> None:
        store = kit.store
        await _pair(store, status)
        before = _sorted(kit.harness.footprint(TARGET))
        if status in FINISHED:
            assert await store.purge(TARGET) is True
        else:
            with pytest.raises(ExecutionActive) as info:
                await store.purge(TARGET)
            assert isinstance(info.value, StoreError)
            assert (info.value.execution_id, info.value.status) == (TARGET, status.value)
            assert _sorted(kit.harness.footprint(TARGET)) == before, "a refused purge wrote"
            loaded = await store.load(TARGET)
            assert loaded is not None and loaded.status is status
            assert await store.purge(TARGET, force=True) is True
        await _assert_gone(kit, TARGET)

    async def test_purge_unknown_is_false_and_harmless(self, kit: Kit) -> None:
        await _pair(kit.store)
        before = _sorted(kit.harness.footprint(TARGET))
        assert await kit.store.purge("nobody") is False
        assert await kit.store.purge("nobody", force=True) is False
        assert await kit.store.purge(TARGET[:-1]) is False  # a prefix is not the id
        assert _sorted(kit.harness.footprint(TARGET)) == before

    async def test_purged_id_is_free_again(self, kit: Kit) -> None:
        store = kit.store
        stale = await _populate(store, TARGET, PEER)
        assert await store.purge(TARGET) is True
        with pytest.raises(StoreConflict) as info:
            await store.commit(stale, [], processed_event_id="late")
        assert (info.value.expected, info.value.found) == (2, None)
        assert kit.harness.footprint(TARGET) == []
        again = new_exe(TARGET, context={"round": 2})
        await store.commit(again, [], trace=step("Start"))
        assert again.version == 1
        assert [t["index"] for t in await store.read_trace(TARGET)] == [0]
        assert await store.is_processed(TARGET, f"{TARGET}-in-1") is False
        assert await store.due_timers(FAR_FUTURE) == []

    async def test_purge_matches_ids_exactly(self, kit: Kit) -> None:
        """Purging one of several look-alike ids touches none of the others."""
        for execution_id in ODD_IDS:
            await _populate(kit.store, execution_id, "kit-peer")
        records = {i: _sorted(kit.harness.footprint(i)) for i in ODD_IDS}
        for n, execution_id in enumerate(ODD_IDS):
            assert await kit.store.purge(execution_id) is True
            assert kit.harness.footprint(execution_id) == [], execution_id
            for other in ODD_IDS[n + 1 :]:
                assert _sorted(kit.harness.footprint(other)) == records[other], (
                    f"purge({execution_id!r}) changed what {other!r} owns"
                )

    async def test_purge_is_atomic_against_a_racing_commit(self, kit: Kit) -> None:
        """A forced purge racing a commit: whichever lands first, nothing is left behind."""
        other = await kit.open()
        for round_no in range(4):
            await _populate(kit.store, TARGET, PEER, Status.RUNNING)
            exe = await other.load(TARGET)
            assert exe is not None
            step_effects: dict[str, Any] = {
                "emits": [(TARGET, event(f"race-{round_no}"))],
                "processed_event_id": f"race-{round_no}",
                "timers": (TimerOp.schedule(f"/race/{round_no}", 1.0),),
                "spawns": [(f"race-child-{round_no}", "/r", {})],
                "trace": step("Race"),
            }

            async def commit(exe: Execution = exe, effects: dict[str, Any] = step_effects) -> Any:
                await other.commit(exe, **effects)

            async def purge() -> bool:
                return await kit.store.purge(TARGET, force=True)

            outcomes = await kit.race([commit, purge])
            assert outcomes[1] is True, outcomes
            assert outcomes[0] is None or isinstance(outcomes[0], StoreConflict), outcomes
            leftover = kit.harness.footprint(TARGET)
            assert leftover == [], f"round {round_no}: {outcomes}: left {leftover}"

    # -- prune_processed ------------------------------------------------------------------

    @SMOKE
    async def test_prune_keeps_every_mark_inside_the_window(self, kit: Kit) -> None:
        ages = await _aged_marks(kit, [("kit-a", 3), ("kit-b", 2), ("kit-c", 3)])
        moments = sorted(ages.values())
        present = set(ages)
        for threshold in (moments[0], moments[3], moments[3], moments[-1]):
            expected_drop = {key for key in present if ages[key] < threshold}
            dropped = await kit.store.prune_processed(threshold)
            present -= expected_drop
            assert await _marked(kit.store, ages) == present, (
                f"prune_processed({threshold!r}) must drop exactly the marks recorded before it "
                "and keep every mark recorded at or after it"
            )
            assert dropped == len(expected_drop)
        # the boundary itself: a mark recorded exactly at older_than stays, just after it goes
        (last,) = present
        assert await kit.store.prune_processed(ages[last]) == 0
        assert await kit.store.prune_processed(math.nextafter(ages[last], math.inf)) == 1
        assert await _marked(kit.store, ages) == set()
        for execution_id in ("kit-a", "kit-b", "kit-c"):  # marks go, executions stay
            assert await kit.store.load(execution_id) is not None

    async def test_prune_uses_the_real_clock(self, kit: Kit) -> None:
        """Marks written just now are inside any window that reaches back from now."""
        exe = new_exe("kit-1")
        for n in range(3):
            await kit.store.commit(exe, [], processed_event_id=f"m{n}")
        assert await kit.store.prune_processed(time.time() - 3600.0) == 0
        assert await kit.store.prune_processed(0.0) == 0
        assert all([await kit.store.is_processed("kit-1", f"m{n}") for n in range(3)])
        _after(await _updated_at(kit.store, "kit-1"))
        assert await kit.store.prune_processed(time.time()) == 3
        assert await kit.store.is_processed("kit-1", "m0") is False

    @pytest.mark.parametrize("batch_size", [1, 2, 3, 1000])
    async def test_prune_in_batches_drops_them_all(self, kit: Kit, batch_size: int) -> None:
        ages = await _aged_marks(kit, [("kit-a", 4), ("kit-b", 2)])
        keep = new_exe("kit-new")
        horizon = math.nextafter(max(ages.values()), math.inf)
        _after(horizon)
        await kit.store.commit(keep, [], processed_event_id="fresh")
        before = await _view(kit.store, "kit-a", "nobody")
        dropped = await kit.store.prune_processed(horizon, batch_size=batch_size)
        assert dropped == len(ages)
        assert await _marked(kit.store, ages) == set()
        assert await kit.store.is_processed("kit-new", "fresh") is True
        after = await _view(kit.store, "kit-a", "nobody")
        assert {**after, "marks": before["marks"]} == before  # only marks changed
        assert await kit.store.prune_processed(horizon, batch_size=batch_size) == 0

    async def test_prune_on_an_empty_dataset(self, kit: Kit) -> None:
        assert await kit.store.prune_processed(FAR_FUTURE) == 0

    @pytest.mark.parametrize(
        ("older_than", "batch_size", "errors"),
        [
            (1.0, 0, ValueError),
            (1.0, -1, ValueError),
            (1.0, 1.5, (TypeError, ValueError)),
            (1.0, True, (TypeError, ValueError)),
            (math.nan, 10, ValueError),
            (math.inf, 10, ValueError),
            ("1", 10, TypeError),
            (None, 10, TypeError),
        ],
    )
    async def test_prune_arguments_checked_before_anything(
        self, kit: Kit, older_than: Any, batch_size: Any, errors: Any
    ) -> None:
        await kit.store.commit(new_exe("kit-1"), [], processed_event_id="m")
        with pytest.raises(errors):
            await kit.store.prune_processed(older_than, batch_size=batch_size)
        assert await kit.store.is_processed("kit-1", "m") is True

    # -- updated_at -----------------------------------------------------------------------

    async def test_updated_at_stamps_every_commit(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        stamps: list[float] = []
        for n in range(4):
            start = time.time()
            if n % 2:
                await kit.store.save(exe)
            else:
                await kit.store.commit(exe, [(None, event(f"e{n}"))], trace=step("Go"))
            end = time.time()
            stamp = await _updated_at(kit.store, "kit-1")
            assert start - PRUNE_TOLERANCE <= stamp <= end + PRUNE_TOLERANCE, (
                f"updated_at {stamp!r} is not the moment of the commit ({start!r}..{end!r})"
            )
            stamps.append(stamp)
        assert stamps == sorted(stamps), f"updated_at went backwards: {stamps}"
        # reads, acks and trace appends are not commits
        await kit.store.append_trace("kit-1", step("Manual"))
        for entry in await kit.store.pending_outbox():
            await kit.store.ack_outbox(entry.seq)
        assert await _updated_at(kit.store, "kit-1") == stamps[-1]
