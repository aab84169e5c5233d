"""Figure 2: commit throughput against the driver's raw equivalent, sync and async.

Side by side in one process, one dataset, taking turns round after round: the harness's
``raw_commit()`` (encode the execution + one CAS write, see
:meth:`~harel.conformance.harness.StoreHarness.raw_commit`), its ``raw_side_commit()`` (the
same plus the emit, dedupe mark, timer and trace step written raw in the same transaction, see
:meth:`~harel.conformance.harness.StoreHarness.raw_side_commit`), ``store.commit`` state-only
and with emit + dedupe mark + timer + trace step, and the same two on the async store (one
task, each call awaited before the next).  Every loop commits to an execution of its own.
Beside them, the *plain raw* write of :mod:`plain` (pydantic's ``model_dump_json()`` and one
CAS ``UPDATE`` of a plain four-column table in the same database, with the same settings; Redis:
a plain ``SET``): what a user would write without this project.  The state-only commit is
judged against the plain raw write (the headline), the side commit against the raw side commit
(the same work done raw); "commit ÷ raw" (the project's codec, the store's table) and "side ÷
raw" are kept for reference.
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from common import Mode, Target, arate, execution, interleaved, open_twins, rate, side_writes
from harel.conformance.harness import RawSide, RawSideCommit, StoreHarness
from harel.store.common.codec import encode_event, encode_execution
from harel.store.common.trace import encode_trace_step
from plain import PlainRaw, plain_raw

STATE_VS_PLAIN = 0.8
"""The headline: a state-only commit against the plain raw write (issue 20)."""
STATE_VS_RAW = 0.8
"""A state-only commit against the internal raw write: judged only where no plain raw write
was measured (else for reference)."""
SIDE_VS_RAW = 0.6
ASYNC_VS_SYNC = 0.8


@dataclass
class Throughput:
    """Commits per second by loop name (``plain raw`` where :mod:`plain` knows the backend,
    ``raw``, ``raw+side``, ``commit``, ``commit+side``,
    ``async commit``, ``async commit+side``; ``raw script`` where the harness has a
    ``raw_script_commit``), and where a state-only commit spends its time when it misses."""

    target: Target
    rates: dict[str, float] = field(default_factory=dict)
    profile: list[tuple[str, float, float]] = field(default_factory=list)
    """Top modules of a profiled state-only commit: ``(module, µs per commit, µs per raw
    write)`` (filled when the commit misses its target against the plain raw write)."""
    error: str | None = None

    def ratio(self, top: str, bottom: str) -> float | None:
        """``rates[top] / rates[bottom]`` when both were measured."""
        a, b = self.rates.get(top), self.rates.get(bottom)
        return a / b if a and b else None


RawCommit = Callable[[str, int, str], None]


def _raw_loop(name: str, store: Any, raw: RawCommit) -> Callable[[int], None]:
    """Encode + ``raw`` on an execution of its own (committed once through the store)."""
    direct = execution(name)
    store.commit(direct, [])

    def step(i: int) -> None:
        direct.context["n"] = i
        expected = direct.version
        direct.version = expected + 1
        raw(direct.id, expected, encode_execution(direct))

    return step


def _plain_loop(store: Any, plain: PlainRaw) -> Callable[[int], None]:
    """The plain raw write (pydantic JSON + one CAS) on an execution of its own."""
    direct = execution("tp-plain-raw")
    store.commit(direct, [])  # the same execution, also stored (not read by the plain write)

    def step(i: int) -> None:
        direct.context["n"] = i
        plain(direct)

    return step


def _raw_side_loop(store: Any, raw: RawSideCommit) -> Callable[[int], None]:
    """Encode the execution, the emitted event and the trace step of :func:`side_writes`,
    then ``raw`` writes them with the dedupe mark and the timer."""
    direct = execution("tp-raw-side")
    store.commit(direct, [])

    def step(i: int) -> None:
        direct.context["n"] = i
        writes = side_writes(direct, direct.version)  # the version: unique across rounds
        (_target, event), timer = writes["emits"][0], writes["timers"][0]
        side = RawSide(
            emit=encode_event(event),
            event_id=writes["processed_event_id"],
            now=time.time(),
            timer_path=timer.path,
            fire_at=timer.fire_at,
            trace_index=direct.version,
            trace=encode_trace_step(writes["trace"]),
        )
        expected = direct.version
        direct.version = expected + 1
        raw(direct.id, expected, encode_execution(direct), side)

    return step


def _sync_loops(
    store: Any, harness: StoreHarness, plain_write: PlainRaw | None = None
) -> dict[str, Any]:
    plain, busy = execution("tp-commit"), execution("tp-side")
    for exe in (plain, busy):
        store.commit(exe, [])

    def commit(i: int) -> None:
        plain.context["n"] = i
        store.commit(plain, [])

    def side(i: int) -> None:
        busy.context["n"] = i
        store.commit(busy, **side_writes(busy, busy.version))

    loops: dict[str, Any] = {"commit": commit, "commit+side": side}
    if plain_write is not None:
        loops["plain raw"] = _plain_loop(store, plain_write)
    raw, raw_side = harness.raw_commit(), harness.raw_side_commit()
    script: RawCommit | None = getattr(harness, "raw_script_commit", lambda: None)()
    if raw is not None:
        loops["raw"] = _raw_loop("tp-raw", store, raw)
    if raw_side is not None:
        loops["raw+side"] = _raw_side_loop(store, raw_side)
    if script is not None:  # extra information (Redis: the store's own script, sent raw)
        loops["raw script"] = _raw_loop("tp-raw-script", store, script)
    return loops


async def _async_loops(store: Any) -> dict[str, Any]:
    plain, busy = execution("tp-acommit"), execution("tp-aside")
    for exe in (plain, busy):
        await store.commit(exe, [])

    async def commit(i: int) -> None:
        plain.context["n"] = i
        await store.commit(plain, [])

    async def side(i: int) -> None:
        busy.context["n"] = i
        await store.commit(busy, **side_writes(busy, busy.version))

    return {"async commit": commit, "async commit+side": side}


def _on(runner: asyncio.Runner, step: Any, seconds: float) -> float:
    """:func:`arate` of ``step`` on ``runner``'s event loop."""
    rate_: float = runner.run(arate(step, seconds))
    return rate_


def profile_commits(step: Callable[[int], None], seconds: float) -> dict[str, float]:
    """Where ``step`` spends its time: profiled microseconds per call by module (own time of
    each function, summed per module; the profiler inflates Python code, so compare rows of
    one profile, not with the unprofiled rates)."""
    profiler = cProfile.Profile()
    calls = 0

    def counted(i: int) -> None:
        nonlocal calls
        step(i)
        calls += 1

    profiler.enable()
    rate(counted, seconds)
    profiler.disable()
    stats: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    spent: dict[str, float] = {}
    for (filename, _line, function), (_cc, _nc, own, _cum, _callers) in stats.items():
        label = _package(filename, function)
        spent[label] = spent.get(label, 0.0) + own * 1e6 / max(calls, 1)
    spent.pop("bench.throughput", None)  # the loop itself
    spent.pop("bench.common", None)
    return spent


def _package(filename: str, function: str) -> str:
    """``harel.store.common.codec``-like label of a profiled function's file."""
    if filename == "~":  # a C function: name it by itself (e.g. sqlite3 execute, json)
        return function.strip("<>").replace("built-in method ", "C: ")
    parts = Path(filename).with_suffix("").parts
    for anchor in ("site-packages", "src", "lib"):
        if anchor in parts:
            tail = parts[len(parts) - parts[::-1].index(anchor) :]
            return ".".join(tail[:4])
    return ".".join(parts[-2:])


def measure(target: Target, workdir: Path, mode: Mode, *, profile: bool = True) -> Throughput:
    """Figure 2 for one backend setting (an error is reported, not raised)."""
    result = Throughput(target)
    try:
        with (
            open_twins(target, workdir) as (harness, runner, store, astore),
            plain_raw(harness) as plain,
        ):
            sync_loops = _sync_loops(store, harness, plain)
            async_loops = runner.run(_async_loops(astore))
            loops: dict[str, Callable[[], float]] = {
                name: partial(rate, step, mode.seconds) for name, step in sync_loops.items()
            }
            for name, astep in async_loops.items():
                loops[name] = partial(_on, runner, astep, mode.seconds)
            result.rates = interleaved(loops, mode.rounds)
            short = (result.ratio("commit", "plain raw") or 1) < STATE_VS_PLAIN
            if profile and short and "raw" in sync_loops:
                store_us = profile_commits(sync_loops["commit"], 3 * mode.seconds)
                raw_us = profile_commits(sync_loops["raw"], 3 * mode.seconds)
                top = sorted(store_us, key=lambda name: -store_us[name])[:7]
                result.profile = [(n, store_us[n], raw_us.get(n, 0.0)) for n in top]
    except Exception as exc:  # a benchmark reports a broken backend and goes on
        result.error = f"{type(exc).__name__}: {exc}"[:300]
    return result
