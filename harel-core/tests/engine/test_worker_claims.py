"""The claiming worker: workers split the work, stop releases leases, a dead worker's leases
are taken over after they expire, and a stalled owner's late step is fenced by the CAS."""

from __future__ import annotations

from typing import Any

from harel import DictStore, DurableRunner, Status
from harel.conformance.attacks import worker_definitions
from harel.engine import core
from harel.engine.worker import Worker
from harel.store.contract import Claim, ExecutionStore

LEASE = 30.0


def _defs() -> dict[str, Any]:
    return worker_definitions()


def _seed(store: ExecutionStore, jobs: int) -> None:
    runner = DurableRunner(store, _defs(), clock=lambda: 0.0)
    runner.create("counter", execution_id="counter")
    for i in range(jobs):
        runner.create("job", execution_id=f"job-{i:03d}")


class Recording:
    """A store that records which owner claimed which group (and passes everything on)."""

    def __init__(self, inner: ExecutionStore) -> None:
        self.inner = inner
        self.claimed: list[tuple[str, str | None]] = []
        self.released: list[tuple[str, str | None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def claim(self, owner: str, now: float, **kwargs: Any) -> list[Claim]:
        claims = self.inner.claim(owner, now, **kwargs)
        self.claimed += [(owner, claim.execution_id) for claim in claims]
        return claims

    def release(self, owner: str, execution_id: str | None, **kwargs: Any) -> None:
        self.released.append((owner, execution_id))
        self.inner.release(owner, execution_id, **kwargs)


def test_a_claiming_worker_drains_everything_and_leaves_no_lease() -> None:
    store = DictStore()
    _seed(store, 6)
    recording = Recording(store)
    worker = Worker(DurableRunner(recording, _defs(), clock=lambda: 100.0), poll=0)  # type: ignore[arg-type]
    assert worker.claiming
    stats = worker.run(once=True)
    assert stats.fired == 6 and stats.claims >= 6
    assert store.load("counter").context["n"] == 6
    assert all(store.load(f"job-{i:03d}").status is Status.DONE for i in range(6))
    assert sorted(recording.claimed) == sorted(recording.released), "a lease was left held"
    assert store.claim("probe", 1e18, lease=LEASE) == [], "work was left behind"


def test_two_workers_take_different_groups() -> None:
    store = DictStore()
    _seed(store, 8)
    recording = Recording(store)
    runners = [DurableRunner(recording, _defs(), clock=lambda: 100.0) for _ in range(2)]  # type: ignore[arg-type]
    workers = [Worker(runner, poll=0, batch=3) for runner in runners]
    # interleave single claims by hand: while one holds a lease, the other never gets it
    first = runners[0].store.claim(workers[0].owner, 100.0, lease=LEASE, limit=3)
    second = runners[1].store.claim(workers[1].owner, 100.0, lease=LEASE, limit=3)
    assert {c.execution_id for c in first}.isdisjoint({c.execution_id for c in second})
    for claim in first:
        store.release(workers[0].owner, claim.execution_id)
    for claim in second:
        store.release(workers[1].owner, claim.execution_id)
    for worker in workers:
        worker.run(once=True)
    assert store.load("counter").context["n"] == 8
    seen = store.load("counter").context["seen"]
    assert len(seen) == len(set(seen)) == 8, "a tick was delivered twice"


def test_a_stop_releases_the_groups_not_started() -> None:
    store = DictStore()
    _seed(store, 5)
    recording = Recording(store)
    runner = DurableRunner(recording, _defs(), clock=lambda: 100.0)  # type: ignore[arg-type]
    worker = Worker(runner, poll=0, batch=100)
    done: list[str] = []
    original = runner.plan.unit

    def unit_then_stop(*args: Any) -> Any:
        outcome = yield from original(*args)
        done.append(outcome)
        worker.stop()  # SIGTERM arriving during the first unit
        return outcome

    runner.plan.unit = unit_then_stop  # type: ignore[method-assign]
    worker.run()
    assert done == ["done"]
    assert sorted(recording.claimed) == sorted(recording.released), "a lease outlived the stop"
    # the four timers not started are claimable at once by another worker, not after the lease
    rest = store.claim("other", 100.0, lease=LEASE)
    assert len([claim for claim in rest if claim.timers]) == 4


def test_a_dead_workers_leases_are_taken_over_after_they_expire() -> None:
    store = DictStore()
    _seed(store, 3)
    held = store.claim("dead-worker", 100.0, lease=LEASE)  # then SIGKILLed: never released
    assert {c.execution_id for c in held} >= {"job-000", "job-001", "job-002"}
    early = Worker(DurableRunner(store, _defs(), clock=lambda: 100.0 + LEASE - 1), poll=0)
    assert early.run(once=True).fired == 0, "a live lease was ignored"
    late = Worker(DurableRunner(store, _defs(), clock=lambda: 100.0 + LEASE), poll=0)
    assert late.run(once=True).fired == 3
    assert store.load("counter").context["n"] == 3


def test_a_stalled_owner_cannot_apply_a_step_over_the_new_owner() -> None:
    """Fencing is the version CAS: the stalled owner's late step conflicts and changes nothing."""
    store = DictStore()
    _seed(store, 1)
    (claim,) = [
        c for c in store.claim("stalled", 100.0, lease=LEASE) if c.execution_id == "job-000"
    ]
    stale = store.load("job-000")  # what the stalled worker loaded before it stalled
    taker = Worker(DurableRunner(store, _defs(), clock=lambda: 100.0 + LEASE), poll=0)
    assert taker.run(once=True).fired == 1
    after = store.load("job-000")
    stalled = DurableRunner(store, _defs(), clock=lambda: 100.0 + LEASE)
    path, fire_at = claim.timers[0]
    event = core.timeout_event("job-000", path, fire_at)
    # the stalled worker wakes up and delivers the same timeout from its stale copy
    delivered = stalled._run(stalled.plan.deliver(stale, event))
    assert store.load("job-000").version == after.version, "the stale owner's step landed"
    assert delivered == (None, False)
    assert store.load("counter").context["n"] == 1


def test_idle_bound_follows_the_next_timer() -> None:
    from harel.engine.worker import idle_bound

    assert idle_bound(1.0, 0.02, 100.0, []) == 1.0  # nothing armed: commits wake us
    assert idle_bound(1.0, 0.02, 100.0, [("e", "/t", 100.25)]) == 0.25
    assert idle_bound(1.0, 0.02, 100.0, [("e", "/t", 99.0)]) == 0.02, "due but held: back off"


def test_an_idle_worker_waits_on_the_stores_wake_ups() -> None:
    store = DictStore()
    calls: list[float] = []

    def wake(timeout: float) -> bool:
        calls.append(timeout)
        return len(calls) == 3  # woken by a commit during the third slice

    worker = Worker(DurableRunner(store, _defs(), clock=lambda: 100.0), poll=5.0)
    worker.waker = wake
    assert worker.idle_pause(False) == 5.0  # nothing armed: the whole poll, wake-ups end it
    worker._pause(5.0)
    assert len(calls) == 3 and all(0 < slice_ <= 0.25 for slice_ in calls)
    _seed(store, 1)  # job-000 arms its timer at 5.0: due, so the idle pause backs off instead
    assert worker.idle_pause(False) < 5.0
