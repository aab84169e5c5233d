"""Figure 4: what the durable runner costs on top of the store, and the engine on its own.

``DurableRunner.process`` (``load_for_event``, the engine step, one commit with the dedupe
mark; the toggle writes no relay work, so there is no sweep and no reload) against a bare
``store.commit`` of the same write on the same store, taking turns round after round: each
bare commit also gets a fresh ``Event`` (its id is the mark) and stores the same toggled
document (RUNNING, active state and history), so the two loops differ only by the runner's
own work.  And the pure engine (``harel.engine.core.process`` on an in-memory execution, no
store at all).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from common import Mode, Target, interleaved, open_harness, rate
from harel.engine import DurableRunner, core, definition_from_dsl
from harel.model import Event, Execution

RUNNER_VS_COMMIT = 0.7
BACKENDS = ("memory", "sqlite")
TOGGLE = """
event Go {}
machine toggle {
  initial A
  state A {}
  state B {}
  from A to B on Go
  from B to A on Go
}
"""


@dataclass
class Overhead:
    """Events (or commits) per second by loop: ``runner``, ``runner, no relay`` (the what-if
    of skipping the relay's two sweeps after a commit that emitted and spawned nothing),
    ``bare commit``, ``engine``; the share of the runner's time spent inside store calls and
    the store calls it makes per event."""

    target: Target
    rates: dict[str, float] = field(default_factory=dict)
    store_share: float | None = None
    calls: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Store method -> (calls per event, µs per call), timed through :class:`TimedStore`; and
    :data:`BARE_TIMED` -> (1, µs per bare commit through the same wrapper)."""
    error: str | None = None

    @property
    def ratio(self) -> float | None:
        """Runner events/s over bare commits/s."""
        runner, bare = self.rates.get("runner"), self.rates.get("bare commit")
        return runner / bare if runner and bare else None

    @property
    def what_if(self) -> float | None:
        """Runner events/s without the relay sweeps over bare commits/s."""
        runner, bare = self.rates.get("runner, no relay"), self.rates.get("bare commit")
        return runner / bare if runner and bare else None


class TimedStore:
    """Forwards to a store, adding up the seconds spent inside its methods and the calls."""

    def __init__(self, store: Any) -> None:
        self.store, self.seconds = store, 0.0
        self.calls: dict[str, int] = {}
        self.spent: dict[str, float] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)
        if not callable(method):
            return method

        def timed(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                took = time.perf_counter() - started
                self.seconds += took
                self.spent[name] = self.spent.get(name, 0.0) + took

        return timed


BARE_TIMED = "bare commit (same wrapper)"
"""The *calls/event* entry of a bare commit timed through the same :class:`TimedStore`, so
the runner's commit is compared with a bare one measured the same way."""


def _bare_commit(store: Any, bare: Execution) -> Callable[[int], None]:
    """One bare step on ``store``: the same input and the same write as a runner step (an
    Event arrives; the toggled document, active state and history, and its mark are stored)."""

    def commit(i: int) -> None:
        event = Event(kind="Go")
        bare.active_path = bare.history[""] = "B" if i % 2 else "A"
        store.commit(bare, [], event.id)

    return commit


def _store_share(
    store: Any, definitions: dict[str, Any], seconds: float, rounds: int, bare: Execution
) -> tuple[float, dict[str, tuple[float, float]]]:
    """The share of ``runner.process`` time spent inside store calls, and per store method
    the calls made per event and the µs each takes; plus :data:`BARE_TIMED`.  The runner and
    the bare commits take turns through their own :class:`TimedStore` for ``rounds`` rounds of
    ``seconds`` each, and the totals are reported (so a noisy moment hits both alike)."""
    timed, wrapped = TimedStore(store), TimedStore(store)
    runner = DurableRunner(cast(Any, timed), definitions)
    bare_step = _bare_commit(wrapped, bare)
    events, busy = 0, 0.0

    def step(i: int) -> None:
        nonlocal events
        runner.process("ov-runner", Event(kind="Go"))
        events += 1

    for _ in range(rounds):
        started = time.perf_counter()
        rate(step, seconds)
        busy += time.perf_counter() - started
        rate(bare_step, seconds)
    calls = {
        name: (count / events, timed.spent[name] * 1e6 / count)
        for name, count in timed.calls.items()
    }
    calls[BARE_TIMED] = (1.0, wrapped.spent["commit"] * 1e6 / wrapped.calls["commit"])
    return timed.seconds / busy, calls


def _started(defn: Any, execution_id: str) -> Execution:
    """A toggle execution started by the engine (RUNNING in ``A``, never stored)."""
    exe = Execution(id=execution_id, definition_id=defn.id)
    core.run_to_completion(core.start(defn, exe), lambda effect: None)
    return exe


def measure(target: Target, workdir: Path, mode: Mode) -> Overhead:
    """Figure 4 for one backend (an error is reported, not raised)."""
    result = Overhead(target)
    try:
        defn = definition_from_dsl(TOGGLE)
        with open_harness(target, workdir) as harness:
            store = harness.open_sync()
            try:
                runner = DurableRunner(store, {defn.id: defn})
                runner.create(defn.id, execution_id="ov-runner")
                bare = _started(defn, "ov-bare")
                store.commit(bare, [])
                pure = _started(defn, "ov-engine")

                loops = {
                    "runner": lambda: rate(
                        lambda i: runner.process("ov-runner", Event(kind="Go")), mode.seconds
                    ),
                    "runner, no relay": lambda: rate(
                        lambda i: runner.process("ov-runner", Event(kind="Go"), _relay=False),
                        mode.seconds,
                    ),
                    "bare commit": lambda: rate(_bare_commit(store, bare), mode.seconds),
                    "engine": lambda: rate(
                        lambda i: core.run_to_completion(
                            core.process(defn, pure, Event(kind="Go")), lambda effect: None
                        ),
                        mode.seconds,
                    ),
                }
                result.rates = interleaved(loops, mode.rounds)
                result.store_share, result.calls = _store_share(
                    store, {defn.id: defn}, mode.seconds / 2, mode.rounds, bare
                )
            finally:
                store.close()
    except Exception as exc:  # a benchmark reports a broken backend and goes on
        result.error = f"{type(exc).__name__}: {exc}"[:300]
    return result
