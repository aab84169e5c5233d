"""What every benchmark shares: the backends under test, the run's sizes, timing, workloads.

A backend joins by being installed: :func:`targets` lists the registry's usable backends, each
at ``HAREL_TEST_<NAME>_URL`` or its declared ``local_url`` (:func:`backend_test_url`), and every
figure gets an isolated dataset from the backend's own harness (:func:`open_harness`).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from harel.conformance import backend_test_url, usable_backend_names
from harel.conformance.harness import StoreHarness
from harel.model import Event, Execution, Status
from harel.registry import harness_for_url
from harel.store.contract import TimerOp

VARIANTS: dict[str, tuple[str, ...]] = {
    "sqlite": ("synchronous=NORMAL", "synchronous=FULL"),
    "libsql": ("synchronous=NORMAL", "synchronous=FULL"),
    "jsondir": ("fsync=false", "fsync=true"),
}
"""Connection settings measured side by side (query parameters added to the URL).  The first
is the CPU-bound setting, used by every figure; the throughput figure runs them all."""

FAR_FUTURE = 4_000_000_000.0
"""A timer time no sweep of the benchmarks ever reaches."""


@dataclass(frozen=True)
class Mode:
    """How long and how big one run is."""

    name: str
    seconds: float  # one timed sample
    rounds: int  # interleaved samples per figure (the median is reported)
    sizes: tuple[int, ...]  # stored executions of the growth figure
    budget: float  # seconds of population allowed per backend (growth figure)
    reps: int  # repetitions of each operation timed by the growth figure


QUICK = Mode("quick", seconds=0.2, rounds=7, sizes=(1_000, 10_000), budget=35.0, reps=21)
FULL = Mode("full", seconds=0.5, rounds=15, sizes=(1_000, 10_000, 100_000), budget=600.0, reps=51)


@dataclass(frozen=True)
class Target:
    """One backend in one connection setting."""

    backend: str
    url: str
    setting: str | None = None

    @property
    def label(self) -> str:
        """``sqlite (synchronous=NORMAL)`` or just the backend's name."""
        return f"{self.backend} ({self.setting})" if self.setting else self.backend


def with_query(url: str, setting: str) -> str:
    """``url`` with the ``key=value`` pairs of ``setting`` set in its query."""
    base, _, query = url.partition("?")  # not urlsplit: ``sqlite:///path`` must keep ``///``
    extra = dict(parse_qsl(setting))
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k not in extra]
    return f"{base}?{urlencode([*pairs, *extra.items()])}"


def targets(workdir: Path, only: list[str] | None = None, *, every_setting: bool) -> list[Target]:
    """The installed, usable backends (``only``: these names), each in its CPU-bound setting,
    or in every setting of :data:`VARIANTS` when ``every_setting``; backends with no URL to
    use are left out (set ``HAREL_TEST_<NAME>_URL``)."""
    found: list[Target] = []
    for name in usable_backend_names():
        if only and name not in only:
            continue
        url = backend_test_url(name, workdir / name)
        if url is None:
            continue
        settings = VARIANTS.get(name, (None,))
        for setting in settings if every_setting else settings[:1]:
            found.append(Target(name, with_query(url, setting) if setting else url, setting))
    return found


@contextmanager
def open_harness(target: Target, workdir: Path) -> Iterator[StoreHarness]:
    """A fresh, isolated dataset of ``target``'s backend, destroyed afterwards."""
    harness = harness_for_url(target.url, workdir)
    try:
        yield harness
    finally:
        harness.destroy()


@contextmanager
def open_twins(
    target: Target, workdir: Path
) -> Iterator[tuple[StoreHarness, asyncio.Runner, Any, Any]]:
    """A fresh dataset of ``target``'s backend with its sync store and its async store (on the
    returned ``asyncio.Runner``) both open; both closed and the dataset destroyed afterwards."""
    with open_harness(target, workdir) as harness, asyncio.Runner() as runner:
        store = harness.open_sync()
        try:
            astore = runner.run(harness.open_async())
            try:
                yield harness, runner, store, astore
            finally:
                runner.run(astore.close())
        finally:
            store.close()


# -- timing -----------------------------------------------------------------------------------


def rate(step: Callable[[int], object], seconds: float) -> float:
    """Calls per second of ``step(i)`` (i = 0, 1, ...) repeated for about ``seconds``."""
    count, started = 0, time.perf_counter()
    deadline = started + seconds
    while True:
        step(count)
        count += 1
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - started)


async def arate(step: Callable[[int], Awaitable[object]], seconds: float) -> float:
    """:func:`rate` for a coroutine function, awaited one call at a time."""
    count, started = 0, time.perf_counter()
    deadline = started + seconds
    while True:
        await step(count)
        count += 1
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - started)


def interleaved(
    loops: dict[str, Callable[[], float]], rounds: int, *, best: bool = False
) -> dict[str, float]:
    """The median (``best``: the highest) of ``rounds`` samples of every loop, the loops
    taking turns in each round (so a noisy moment of the machine hits them all alike)."""
    samples: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(rounds):
        for name, loop in loops.items():
            samples[name].append(loop())
    pick = max if best else statistics.median
    return {name: pick(values) for name, values in samples.items()}


def timed_ms(call: Callable[[], object]) -> float:
    """Milliseconds one call takes."""
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


# -- workloads --------------------------------------------------------------------------------


def execution(execution_id: str, n: int = 0, *, status: Status = Status.RUNNING) -> Execution:
    """A small, realistic execution (about 300 bytes of JSON) never stored yet."""
    return Execution(
        id=execution_id,
        definition_id=f"bench-{n % 4}",
        status=status,
        active_path="Main.Waiting",
        context={"n": n, "payload": "x" * 200},
    )


def side_writes(exe: Execution, i: int) -> dict[str, Any]:
    """The keyword arguments of a commit with one emit, a dedupe mark, a timer and a trace step
    (what one engine step typically writes); ``i`` names the event, so pass a number no other
    commit of ``exe`` used (its version), else the dedupe mark is a no-op repeat."""
    return {
        "emits": [(exe.id, Event(kind="Tick", data={"i": i}))],
        "processed_event_id": f"{exe.id}-ev-{i}",
        "timers": (TimerOp.schedule("Main.Waiting", FAR_FUTURE + i),),
        "trace": {"event": "Tick", "from": "Main.Waiting", "to": "Main.Waiting"},
    }


def ten_spawns(exe: Execution, i: int) -> dict[str, Any]:
    """The keyword arguments of a commit writing ten spawn intents."""
    return {
        "emits": [],
        "spawns": [(f"{exe.id}-c{i}-{k}", "Main.Fork.R", {"k": k}) for k in range(10)],
    }


def ratio_mark(value: float | None, target: float, *, at_most: bool = False) -> str:
    """✓ when ``value`` meets ``target`` (>=, or <= with ``at_most``), ✗ when not, n/a unknown."""
    if value is None:
        return "n/a"
    ok = value <= target if at_most else value >= target
    return "✓" if ok else "✗"
