"""Races: threads (sync flavour) or tasks (async flavour) writing at the same time.

* several writers on one execution: exactly one wins each version, the losers' side writes
  (outbox, processed marks, timers, spawns, trace steps) never appear, even when a loser's
  commit is byte-identical to the winner's;
* many executions committing concurrently through ONE store object (catches transactions
  of different executions interleaving on a shared connection);
* concurrent first inserts of one id: one succeeds, the others get ``StoreConflict``;
* ``multi_process``: two interpreters (one sync, one async store, both opened through the
  registry on ``harness.url()``) racing commits on one execution.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from harel.conformance.harness import StoreHarness
from harel.conformance.suite._base import (
    FAR_FUTURE,
    SMOKE,
    Kit,
    KitBase,
    declared_capabilities,
    event,
    new_exe,
    step,
    stored,
)
from harel.conformance.suite._processes import require_url, start_racer
from harel.model import Execution
from harel.store.contract import AsyncExecutionStore, StoreConflict, TimerOp

WRITERS = 6
ROUNDS = 3
EXECUTIONS = 16
STEPS_EACH = 3
PROCESS_COMMITS = 12
"""Commits each of the two racing processes lands (so 24 versions change hands)."""


def _writer_step(
    store: AsyncExecutionStore, exe: Execution, tag: str
) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        await store.commit(
            exe,
            [(None, event(f"out-{tag}"))],
            processed_event_id=f"in-{tag}",
            timers=(TimerOp.schedule(f"/t/{tag}", 100.0), TimerOp.schedule("/shared", 50.0)),
            spawns=[(f"child-{tag}", "/r", {"tag": tag})],
            trace=step("Go", tag=tag),
        )

    return run


def _conflicts(outcomes: list[Exception | None]) -> list[StoreConflict]:
    unexpected = [o for o in outcomes if o is not None and not isinstance(o, StoreConflict)]
    assert not unexpected, f"racing writers raised something other than StoreConflict: {unexpected}"
    return [o for o in outcomes if isinstance(o, StoreConflict)]


class ConcurrencyTests(KitBase):
    """Racing writers through one store and through two stores over one dataset."""

    @SMOKE
    async def test_racing_writers_one_winner_per_version(self, kit: Kit) -> None:
        other = await kit.open()
        stores = [kit.store, other]
        await stored(kit.store, new_exe("kit-1"))
        winners: list[str] = []
        for round_no in range(ROUNDS):
            version = round_no + 1
            copies: list[Execution] = []
            for i in range(WRITERS):
                loaded = await stores[i % 2].load("kit-1")
                assert loaded is not None and loaded.version == version
                loaded.context["winner"] = f"r{round_no}w{i}"
                copies.append(loaded)
            tags = [f"r{round_no}w{i}" for i in range(WRITERS)]
            outcomes = await kit.race(
                [_writer_step(stores[i % 2], copies[i], tags[i]) for i in range(WRITERS)]
            )
            conflicts = _conflicts(outcomes)
            won = [tags[i] for i, o in enumerate(outcomes) if o is None]
            assert len(won) == 1, f"round {round_no}: {len(won)} winners at version {version}"
            assert len(conflicts) == WRITERS - 1
            for exc in conflicts:
                assert (exc.expected, exc.found) == (version, version + 1)
            for i, o in enumerate(outcomes):
                assert copies[i].version == (version + 1 if o is None else version)
            winners.append(won[0])
            loaded = await kit.store.load("kit-1")
            assert loaded is not None and loaded.version == version + 1
            assert loaded.context["winner"] == won[0]

        # only the winners' side writes are visible, in round order
        outbox = await kit.store.pending_outbox()
        assert [entry.event.id for entry in outbox] == [f"out-{tag}" for tag in winners]
        spawns = await kit.store.pending_spawns()
        assert [s.child_id for s in spawns] == [f"child-{tag}" for tag in winners]
        timers = await kit.store.due_timers(FAR_FUTURE)
        assert sorted(path for _, path, _ in timers) == sorted(
            ["/shared", *(f"/t/{tag}" for tag in winners)]
        )
        trace = await kit.store.read_trace("kit-1")
        assert [(t["index"], t["tag"]) for t in trace] == list(enumerate(winners))
        for round_no in range(ROUNDS):
            for i in range(WRITERS):
                tag = f"r{round_no}w{i}"
                assert await kit.store.is_processed("kit-1", f"in-{tag}") is (tag in winners)

    async def test_byte_identical_losers_leave_nothing(self, kit: Kit) -> None:
        """Writers committing the very same document and effects: still one winner."""
        other = await kit.open()
        stores = [kit.store, other]
        await stored(kit.store, new_exe("kit-1", context={"same": True}))
        copies = []
        for i in range(WRITERS):
            loaded = await stores[i % 2].load("kit-1")
            assert loaded is not None
            copies.append(loaded)
        outcomes = await kit.race(
            [_writer_step(stores[i % 2], copies[i], "same") for i in range(WRITERS)]
        )
        conflicts = _conflicts(outcomes)
        assert outcomes.count(None) == 1 and len(conflicts) == WRITERS - 1
        assert [e.event.id for e in await kit.store.pending_outbox()] == ["out-same"]
        assert [s.child_id for s in await kit.store.pending_spawns()] == ["child-same"]
        assert [t["index"] for t in await kit.store.read_trace("kit-1")] == [0]
        loaded = await kit.store.load("kit-1")
        assert loaded is not None and loaded.version == 2

    async def test_many_executions_through_one_store(self, kit: Kit) -> None:
        """Concurrent commits of different executions through one store object all land."""
        store = kit.store

        def lifecycle(n: int) -> Callable[[], Awaitable[None]]:
            async def run() -> None:
                exe = new_exe(f"kit-{n:02d}")
                for s in range(STEPS_EACH):
                    exe.context["step"] = s
                    await store.commit(
                        exe,
                        [(exe.id, event(f"e-{n:02d}-{s}"))],
                        processed_event_id=f"in-{s}",
                        timers=(TimerOp.schedule("/t", float(n * 10 + s)),),
                        spawns=[(f"c-{n:02d}-{s}", "/r", {"n": n, "s": s})],
                        trace=step("Go", n=n, s=s),
                    )

            return run

        outcomes = await kit.race([lifecycle(n) for n in range(EXECUTIONS)])
        assert [o for o in outcomes if o is not None] == []
        outbox = await store.pending_outbox()
        assert len(outbox) == EXECUTIONS * STEPS_EACH
        seqs = [entry.seq for entry in outbox]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        for n in range(EXECUTIONS):
            mine = [e.event.id for e in outbox if e.target_id == f"kit-{n:02d}"]
            assert mine == [f"e-{n:02d}-{s}" for s in range(STEPS_EACH)]
            loaded = await store.load(f"kit-{n:02d}")
            assert loaded is not None
            assert (loaded.version, loaded.context) == (STEPS_EACH, {"step": STEPS_EACH - 1})
            trace = await store.read_trace(f"kit-{n:02d}")
            assert [(t["index"], t["n"], t["s"]) for t in trace] == [
                (s, n, s) for s in range(STEPS_EACH)
            ]
            for s in range(STEPS_EACH):
                assert await store.is_processed(f"kit-{n:02d}", f"in-{s}")
        spawns = await store.pending_spawns()
        assert sorted((s.parent_id, s.child_id) for s in spawns) == sorted(
            (f"kit-{n:02d}", f"c-{n:02d}-{s}") for n in range(EXECUTIONS) for s in range(STEPS_EACH)
        )
        assert await store.due_timers(FAR_FUTURE) == sorted(
            (f"kit-{n:02d}", "/t", float(n * 10 + STEPS_EACH - 1)) for n in range(EXECUTIONS)
        )

    async def test_concurrent_first_insert(self, kit: Kit) -> None:
        """Several version-0 inserts of one id: one succeeds, the rest get StoreConflict."""
        other = await kit.open()
        stores = [kit.store, other]
        copies = [new_exe("kit-1", context={"writer": i}) for i in range(WRITERS)]
        outcomes = await kit.race(
            [_writer_step(stores[i % 2], copies[i], f"w{i}") for i in range(WRITERS)]
        )
        conflicts = _conflicts(outcomes)
        (winner,) = [i for i, o in enumerate(outcomes) if o is None]
        assert len(conflicts) == WRITERS - 1
        for exc in conflicts:
            assert (exc.expected, exc.found) == (0, 1)
        assert [c.version for c in copies] == [1 if i == winner else 0 for i in range(WRITERS)]
        loaded = await kit.store.load("kit-1")
        assert loaded is not None and loaded.context == {"writer": winner}
        assert [e.event.id for e in await kit.store.pending_outbox()] == [f"out-w{winner}"]
        assert [s.child_id for s in await kit.store.pending_spawns()] == [f"child-w{winner}"]
        assert [t["tag"] for t in await kit.store.read_trace("kit-1")] == [f"w{winner}"]

    @SMOKE
    def test_multi_process_writers_share_one_dataset(self, harel_harness: StoreHarness) -> None:
        """``multi_process``: two processes race commits on one execution; exactly one wins
        each version and nothing either of them committed is lost or doubled.  Nothing to
        verify when the harness does not declare it."""
        caps = declared_capabilities(type(harel_harness))
        if caps is None:
            pytest.fail(f"{type(harel_harness).__name__} must declare its capabilities")
        if not caps.multi_process:
            return
        require_url(harel_harness, "multi_process")
        store = harel_harness.open_sync()
        try:
            store.save(new_exe("kit-race", context={"log": []}))
            racers = [
                start_racer(harel_harness, "kit-race", "p0", PROCESS_COMMITS, "sync"),
                start_racer(harel_harness, "kit-race", "p1", PROCESS_COMMITS, "async"),
            ]
            for racer in racers:
                racer.wait_ready()
            for racer in racers:
                racer.go()
            results = [racer.result() for racer in racers]
            won = [set(result["won"]) for result in results]
            total = 2 * PROCESS_COMMITS
            assert not won[0] & won[1], f"both processes won versions {sorted(won[0] & won[1])}"
            assert sorted(won[0] | won[1]) == list(range(2, total + 2))
            final = store.load("kit-race")
            assert final is not None and final.version == total + 1
            tags = [f"p{p}-{k}" for p in (0, 1) for k in range(PROCESS_COMMITS)]
            assert sorted(final.context["log"]) == sorted(tags), "a committed step was lost"
            outbox = [e.event.id for e in store.pending_outbox()]
            assert sorted(outbox) == sorted(f"out-{tag}" for tag in tags)
            assert all(store.is_processed("kit-race", f"in-{tag}") for tag in tags)
            trace = store.read_trace("kit-race")
            assert [t["version"] for t in trace] == list(range(2, total + 2))
            assert store.due_timers(FAR_FUTURE) == [
                ("kit-race", "/t/p0", float(PROCESS_COMMITS - 1)),
                ("kit-race", "/t/p1", float(PROCESS_COMMITS - 1)),
            ]
        finally:
            store.close()
