"""Figure 7: events per second through a slow network, with and without the runner's kept
copies (issue 20: one round trip per event).

Every backend reachable over TCP is opened through a
:class:`~harel.conformance.proxy.CountingProxy` with :data:`DELAY` seconds added each way (the
URL rewritten as figure 1 does: :func:`roundtrips.proxied`).  Two sync ``DurableRunner`` objects
over that one store drive the same sequential workload, each on executions of its own (a
two-state toggle, no actions, no emits; :data:`EXECUTIONS` executions, one ``Go`` each in
turn, round-robin): *before* with ``keep_copies=0`` (``load_for_event`` + ``commit`` per
event), *after* with its default kept copies (one ``commit`` per event).  The executions are
created before the clock starts.  The two take turns in pairs (before then after, after then
before), so a noisy moment, or a fake that slows as its table grows (moto), burdens both
alike; no pair is started that would take the timed calls past the workload's budget
(DynamoDB on moto is ~10x slower than the rest), so a slow backend reports fewer events.
Events/s = events ÷ the seconds spent in ``process``; round trips per event = the proxy's
count over those calls ÷ events.  A backend whose URL names no server (SQLite, libSQL,
jsondir, memory, Mongo on mongomock) is listed as *no network*.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import FULL, Mode, Target, open_harness
from harel.conformance.proxy import CountingProxy
from harel.engine import DurableRunner, definition_from_dsl
from harel.model import Event
from harel.registry import open_store
from overhead import TOGGLE
from roundtrips import proxied

DELAY = 0.001
"""Seconds the proxy sleeps before forwarding each chunk, in each direction."""

EXECUTIONS = 10
"""Executions per side, stepped round-robin."""

SIDES = ("before", "after")
KEEP = {"before": 0, "after": None}
"""``keep_copies`` per side (``None``: the runner's default)."""

NO_NETWORK = "no network"


@dataclass(frozen=True)
class Workload:
    """How much each side runs: up to ``rounds`` turns (an even number: each side goes first
    as often as the other) of ``events`` events per execution, no new pair of turns started
    once the timed calls would pass ``budget`` seconds (a slow fake)."""

    executions: int = EXECUTIONS
    events: int = 4
    rounds: int = 4
    budget: float = 15.0

    @property
    def per_side(self) -> int:
        """Events each side processes when every round runs."""
        return self.executions * self.events * self.rounds


QUICK_WORKLOAD = Workload(events=4, rounds=4, budget=15.0)  # up to 160 events a side
FULL_WORKLOAD = Workload(events=25, rounds=4, budget=300.0)  # up to 1,000 events a side


def workload(mode: Mode) -> Workload:
    """The workload of ``mode`` (quick: a few seconds a backend)."""
    return FULL_WORKLOAD if mode is FULL else QUICK_WORKLOAD


@dataclass
class Latency:
    """One backend's figure: per side the events processed, the seconds they took and the
    proxy's round trips over them; ``how`` says why nothing was measured (:data:`NO_NETWORK`)."""

    target: Target
    how: str = ""
    events: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    round_trips: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    def rate(self, side: str) -> float | None:
        """Events per second of ``side``, ``None`` when it was not measured."""
        events, seconds = self.events.get(side), self.seconds.get(side)
        return events / seconds if events and seconds else None

    def per_event(self, side: str) -> float | None:
        """Round trips per event of ``side``, ``None`` when it was not measured."""
        events = self.events.get(side)
        return self.round_trips.get(side, 0) / events if events else None

    @property
    def ratio(self) -> float | None:
        """After's events/s over before's."""
        before, after = self.rate("before"), self.rate("after")
        return after / before if before and after else None


def _runner(store: Any, definitions: dict[str, Any], side: str) -> DurableRunner:
    """The sync runner of ``side`` over ``store`` (``keep_copies`` as :data:`KEEP` says)."""
    keep = KEEP[side]
    if keep is None:
        return DurableRunner(store, definitions)
    return DurableRunner(store, definitions, keep_copies=keep)


def drive(store: Any, proxy: CountingProxy, work: Workload, result: Latency) -> None:
    """Run ``work`` on both sides over ``store`` (reached through ``proxy``), adding each
    side's events, seconds and round trips into ``result``."""
    defn = definition_from_dsl(TOGGLE)
    runners = {side: _runner(store, {defn.id: defn}, side) for side in SIDES}
    ids = {side: [f"lat-{side}-{n}" for n in range(work.executions)] for side in SIDES}
    for side in SIDES:
        for execution_id in ids[side]:
            runners[side].create(defn.id, execution_id=execution_id)
        result.events[side], result.seconds[side], result.round_trips[side] = 0, 0.0, 0
    spent = 0.0
    for turn in range(work.rounds):
        if turn and turn % 2 == 0 and spent * (turn + 2) / turn > work.budget:
            break  # one more pair of turns would overrun the budget: report what was measured
        started_round = time.perf_counter()
        for side in SIDES if turn % 2 == 0 else SIDES[::-1]:
            runner, names = runners[side], ids[side]
            proxy.reset()
            started = time.perf_counter()
            for _ in range(work.events):
                for execution_id in names:
                    runner.process(execution_id, Event(kind="Go"))
            result.seconds[side] += time.perf_counter() - started
            result.round_trips[side] += proxy.round_trips
            result.events[side] += work.events * len(names)
        spent += time.perf_counter() - started_round


def measure(target: Target, workdir: Path, mode: Mode, work: Workload | None = None) -> Latency:
    """Figure 7 for one backend (an error is reported, not raised)."""
    result = Latency(target)
    try:
        with open_harness(target, workdir) as harness:
            url = harness.url()
            route = proxied(url, 0) if url else None
            if url is None or route is None:
                result.how = NO_NETWORK
                return result
            _, host, port = route
            with CountingProxy(host, port, delay=DELAY) as proxy:
                through = proxied(url, proxy.port)
                assert through is not None
                store = open_store(through[0])
                try:
                    drive(store, proxy, work or workload(mode), result)
                finally:
                    store.close()
    except Exception as exc:  # a benchmark reports a broken backend and goes on
        result.error = f"{type(exc).__name__}: {exc}"[:300]
    return result
