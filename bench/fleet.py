"""Figure 6: a fleet of ``harel worker`` processes draining due work (issue 16, "Measured").

* Drain: N executions each with a timer due now and N relayed events (outbox entries, one
  per target execution) are seeded into a fresh dataset; then K ``harel worker --once``
  processes are started together (K = 1, 2, 4, 8), and one process with ``--concurrency C``
  (C = 1, 8, 32; 1 is the sync worker, as ``harel worker`` runs it).  Timed from the moment
  the first worker is up (its banner) until the last one exits; the wall time from the first
  ``Popen`` is kept beside it.  The store is checked afterwards: nothing left due or pending,
  every timer fired once and every event delivered once (the version and state of every
  execution say so: a second delivery would move them on).
* Wasted attempts per delivered unit: the workers' own counts (``harel worker``'s summary
  line: deliveries refused with ``StoreConflict`` + deliveries whose dedupe mark was already
  set), summed over the fleet, divided by the 2N units.
* Timer lateness at low load: one idle ``harel worker`` (its defaults) and M timers armed one
  per execution, due at spread times a few seconds ahead; lateness = the firing commit's
  ``updated_at`` (the worker's clock) - the timer's ``fire_at``; p50 and p99.

Multi-process backends only (a URL other processes can open): PostgreSQL, Redis, SQLite
file, libSQL file, rqlite's test node, DynamoDB on moto; the others are skipped.
"""

from __future__ import annotations

import functools
import math
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from common import Mode, Target, open_harness
from harel.conformance.harness import StoreHarness
from harel.engine.definition import Definition
from harel.engine.dsl import definition_from_dsl
from harel.engine.runner import DurableRunner
from harel.engine.worker import CLAIMS_PER_ROUND
from harel.model import Event, ExecutionSummary, Status
from harel.store.contract import ExecutionStore

BACKENDS = ("postgres", "redis", "sqlite", "libsql", "rqlite", "dynamodb")
WORKERS = (1, 2, 4, 8)
CONCURRENCY = (1, 8, 32)
UNITS = {"quick": 1_000, "full": 10_000}
"""N: due timers, and as many relayed events, per drain."""
SMALLER = {"dynamodb": {"quick": 50, "full": 200}}
"""Smaller N where the fake is slow (moto, in the bench's own process, deep-copies its table
on every transaction: ~6 units/s drained on this machine)."""
LATE_TIMERS = 200
LATE_LEAD = 1.5
"""Seconds between the start of the arming and the first timer's ``fire_at`` (longer where
arming would take more than half of it, judged by the speed of the drains' seeding)."""
LATE_SPREAD = 3.0
"""Seconds over which the timers' ``fire_at`` are spread."""
EMITS_PER_COMMIT = 25
PASSES = 5
"""Rounds of ``--once`` processes a drain may take (work left for later is retried)."""
DEADLINE = 600.0
"""Seconds one pass of worker processes may take before the drain is reported failed."""

SCALE_TARGET = 1.6
"""Target: 4 workers drain at least this many times as fast as 1 (PostgreSQL)."""
SCALE_BACKENDS = ("postgres",)
WASTE_TARGET = 0.05
"""Target: wasted attempts per delivered unit, at most."""
LATE_TARGET_MS = 50.0
"""Target: timer lateness p99 at most this many ms (PostgreSQL and Redis)."""
LATE_BACKENDS = ("postgres", "redis")

TIMEOUT = 5.0
MACHINES = f"""
event Ping {{}}
machine tick {{
  initial Wait
  state Wait {{ timeout {TIMEOUT:g} }}
  final Fired success {{}}
  from Wait to Fired on Timeout
}}
machine inbox {{
  initial Even
  state Even {{}}
  state Odd {{}}
  from Even to Odd on Ping
  from Odd to Even on Ping
}}
machine source {{
  initial Idle
  state Idle {{}}
}}
"""
"""``tick``: a timer, fired once → ``Fired`` at version 2.  ``inbox``: one ``Ping`` →
``Odd`` at version 2 (a second one would toggle it back).  ``source``: emits the Pings."""

SUMMARY = re.compile(
    r"(\d+) relayed, (\d+) timer\(s\) fired.*?(\d+) conflict\(s\), (\d+) already done"
)


class FleetFailure(Exception):
    """A drain did not end with every unit done exactly once (or a worker failed)."""


@dataclass
class Drain:
    """One drain: how long it took and what the workers said they did."""

    units: int
    span: float  # first worker up -> last worker exited (all passes)
    wall: float  # first Popen -> last worker exited (all passes)
    delivered: int  # relayed + fired, summed over the workers' summary lines
    wasted: int  # conflicts + already-done deliveries, summed likewise
    passes: int = 1
    seeding: float = 0.0  # seconds the seeding took (2N + 1 creates, N / 25 emitting commits)

    @property
    def rate(self) -> float:
        """Units per second over the span."""
        return self.units / self.span if self.span > 0 else math.inf

    @property
    def waste(self) -> float:
        """Wasted attempts per unit."""
        return self.wasted / self.units


@dataclass
class Fleet:
    """Figure 6 for one backend: ``processes[K]``, ``concurrency[C]``, lateness in ms."""

    target: Target
    units: int = 0  # N of each kind
    batch: int = 100
    processes: dict[int, Drain] = field(default_factory=dict)
    concurrency: dict[int, Drain] = field(default_factory=dict)
    lateness: list[float] = field(default_factory=list)  # ms, one per timer
    lead: float = LATE_LEAD  # seconds from the start of the arming to the first fire_at
    spread: float = LATE_SPREAD  # seconds from the first fire_at to the last
    skipped: str | None = None
    error: str | None = None

    def ratio(self, workers: int) -> float | None:
        """Rate with ``workers`` processes ÷ rate with one."""
        one, many = self.processes.get(1), self.processes.get(workers)
        return None if one is None or many is None else many.rate / one.rate

    def late(self, q: int) -> float | None:
        """The ``q``-th percentile of lateness in ms (``None`` when not measured)."""
        if len(self.lateness) < 2:
            return self.lateness[0] if self.lateness else None
        return statistics.quantiles(self.lateness, n=100, method="inclusive")[q - 1]


def write_definitions(workdir: Path) -> Path:
    """The machines' directory for ``--definitions``."""
    defs = workdir / "defs"
    defs.mkdir(parents=True, exist_ok=True)
    (defs / "fleet.stm").write_text(MACHINES)
    return defs


@functools.cache
def _definitions() -> dict[str, Definition]:
    return {name: definition_from_dsl(MACHINES, name) for name in ("tick", "inbox", "source")}


def _runner(store: ExecutionStore, clock: float) -> DurableRunner:
    """A runner whose clock stands still at ``clock`` (a timer armed now is due at
    ``clock + TIMEOUT``)."""
    return DurableRunner(store, _definitions(), clock=lambda: clock)


def seed(store: ExecutionStore, units: int, now: float) -> None:
    """``units`` executions with a timer due at ``now`` and ``units`` Pings in the outbox,
    one for each of ``units`` inbox executions."""
    runner = _runner(store, now - TIMEOUT)
    for i in range(units):
        runner.create("tick", execution_id=f"t-{i:05d}", _relay=False)
    for i in range(units):
        runner.create("inbox", execution_id=f"e-{i:05d}", _relay=False)
    source = runner.create("source", execution_id="source", _relay=False)
    for start in range(0, units, EMITS_PER_COMMIT):
        emits = [
            (f"e-{i:05d}", Event(id=f"ping-{i:05d}", kind="Ping"))
            for i in range(start, min(units, start + EMITS_PER_COMMIT))
        ]
        store.commit(source, emits)


def listed(store: ExecutionStore, definition_id: str) -> list[ExecutionSummary]:
    """Every stored execution of ``definition_id`` (all pages)."""
    found: list[ExecutionSummary] = []
    cursor: str | None = None
    while True:
        page = store.list_executions(definition_id=definition_id, limit=500, cursor=cursor)
        found += page.items
        cursor = page.next_cursor
        if cursor is None:
            return found


def leftover(store: ExecutionStore) -> bool:
    """Whether any timer is still due or any outbox entry still pending."""
    return bool(store.due_timers(time.time() + 3600, limit=1) or store.pending_outbox(limit=1))


def verify(store: ExecutionStore, units: int) -> None:
    """:class:`FleetFailure` unless every timer fired once and every Ping arrived once."""
    problems: list[str] = []
    if leftover(store):
        problems.append("work still due or pending")
    ticks = listed(store, "tick")
    fired = [s for s in ticks if s.status is Status.DONE and s.version == 2]
    if len(ticks) != units or len(fired) != units:
        problems.append(f"{units - len(fired)} of {units} timers not fired exactly once")
    inboxes = listed(store, "inbox")
    got = [s for s in inboxes if s.active_path == "Odd" and s.version == 2]
    if len(inboxes) != units or len(got) != units:
        problems.append(f"{units - len(got)} of {units} events not delivered exactly once")
    if problems:
        raise FleetFailure("; ".join(problems))


@dataclass
class _Proc:
    """One worker process, its output read on a thread (time of its first line, its end)."""

    popen: subprocess.Popen[str]
    stderr: IO[str]
    up: float | None = None
    ended: float | None = None
    lines: list[str] = field(default_factory=list)

    def follow(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            if self.up is None:
                self.up = time.perf_counter()
            self.lines.append(line)
        self.popen.wait()
        self.ended = time.perf_counter()


def worker_command(url: str, defs: Path) -> list[str]:
    """``python -m harel worker --store URL --definitions DIR``."""
    return [sys.executable, "-m", "harel", "worker", "--store", url, "--definitions", str(defs)]


def _pass(command: list[str], count: int, logs: Path) -> tuple[float, float, int, int]:
    """Start ``count`` processes together and wait for them: (first up, last exit,
    delivered, wasted); :class:`FleetFailure` when one fails or says nothing."""
    procs: list[_Proc] = []
    threads: list[threading.Thread] = []
    try:
        for n in range(count):
            err = (logs / f"worker-{n}.err").open("w+")
            popen = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
            procs.append(_Proc(popen, err))
        for proc in procs:
            threads.append(threading.Thread(target=proc.follow, daemon=True))
            threads[-1].start()
        for thread in threads:
            thread.join(timeout=DEADLINE)
        delivered = wasted = 0
        for proc in procs:
            if proc.ended is None:
                raise FleetFailure(f"a worker still runs after {DEADLINE:.0f} s")
            found = SUMMARY.search("".join(proc.lines))
            if proc.popen.returncode != 0 or found is None:
                proc.stderr.seek(0)
                tail = proc.stderr.read()[-400:]
                raise FleetFailure(f"worker exited {proc.popen.returncode}: {tail}")
            relayed, fired, conflicts, repeats = (int(g) for g in found.groups())
            delivered += relayed + fired
            wasted += conflicts + repeats
        ups = [p.up for p in procs if p.up is not None]
        ends = [p.ended for p in procs if p.ended is not None]
        return min(ups), max(ends), delivered, wasted
    finally:
        for proc in procs:
            if proc.popen.poll() is None:
                proc.popen.kill()
                proc.popen.wait()
            proc.stderr.close()


def _url(harness: StoreHarness) -> str:
    url = harness.url()
    if url is None:
        raise FleetFailure("the harness gives no URL other processes can open")
    return url


def drain(
    harness: StoreHarness, defs: Path, units: int, count: int, *, concurrency: bool, batch: int
) -> Drain:
    """Seed ``units`` + ``units`` into ``harness``'s dataset, drain it with ``count``
    processes (``concurrency``: one process, ``--concurrency count``), verify the store."""
    url = _url(harness)
    store = harness.open_sync()
    try:
        seeding = time.perf_counter()
        seed(store, units, time.time())
        seeding = time.perf_counter() - seeding
        extra = ["--once", "--batch", str(batch)]
        if concurrency:
            extra += ["--concurrency", str(count)]
        command = [*worker_command(url, defs), *extra]
        processes = 1 if concurrency else count
        started = time.perf_counter()
        first_up, end, delivered, wasted = _pass(command, processes, defs.parent)
        passes = 1
        while passes < PASSES and leftover(store):
            time.sleep(0.2)  # a group left for later is claimable again after retry_after
            _, end, more, more_wasted = _pass(command, processes, defs.parent)
            delivered, wasted, passes = delivered + more, wasted + more_wasted, passes + 1
        verify(store, units)
        spans = (end - first_up, end - started)
        return Drain(2 * units, *spans, delivered, wasted, passes, seeding)
    finally:
        store.close()


def lateness(
    harness: StoreHarness,
    defs: Path,
    timers: int = LATE_TIMERS,
    *,
    lead: float = LATE_LEAD,
    spread: float = LATE_SPREAD,
) -> list[float]:
    """Start one ``harel worker`` (defaults), arm ``timers`` timers due between ``lead`` and
    ``lead + spread`` seconds ahead, wait until all fired; each one's lateness in ms (the
    firing commit's ``updated_at`` - its ``fire_at``)."""
    store = harness.open_sync()
    proc = subprocess.Popen(
        worker_command(_url(harness), defs),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        if not proc.stdout.readline():  # the worker is up (and idles from now on)
            raise FleetFailure(f"the worker did not start: {proc.communicate()[1][-400:]}")
        base = time.time() + lead
        due: dict[str, float] = {}
        for i in range(timers):
            fire_at = base + spread * i / timers
            execution_id = f"late-{i:04d}"
            runner = _runner(store, fire_at - TIMEOUT)
            runner.create("tick", execution_id=execution_id, _relay=False)
            due[execution_id] = fire_at
        if time.time() > base:
            raise FleetFailure("arming the timers took longer than the lead: raise LATE_LEAD")
        deadline = time.time() + lead + spread + 60
        while True:
            done = [s for s in listed(store, "tick") if s.status is Status.DONE and s.id in due]
            if len(done) == timers:
                break
            if time.time() > deadline or proc.poll() is not None:
                raise FleetFailure(f"{timers - len(done)} of {timers} timers never fired")
            time.sleep(0.25)
        if any(s.updated_at is None for s in done):
            raise FleetFailure("the store's listing gives no updated_at")
        return [((s.updated_at or 0.0) - due[s.id]) * 1000 for s in done]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        store.close()


def batch_for(units: int) -> int:
    """``--batch`` so that one ``--once`` round (:data:`CLAIMS_PER_ROUND` claims) of one
    worker can drain all ``2 * units`` units: at least the default 100."""
    return max(100, math.ceil(2 * units / (CLAIMS_PER_ROUND * 0.8)))


def measure(target: Target, workdir: Path, mode: Mode) -> Fleet:
    """Figure 6 for one backend (an error is reported, not raised)."""
    result = Fleet(target)
    if target.backend not in BACKENDS:
        result.skipped = "not a multi-process backend of this figure"
        return result
    result.units = SMALLER.get(target.backend, UNITS)[mode.name]
    result.batch = batch_for(result.units)
    defs = write_definitions(workdir)
    try:
        runs = [(n, False) for n in WORKERS] + [(n, True) for n in CONCURRENCY]
        for count, concurrency in runs:
            where = workdir / f"{'c' if concurrency else 'k'}{count}"
            with open_harness(target, where) as harness:
                if harness.url() is None:
                    result.skipped = "no URL other processes can open"
                    return result
                got = drain(
                    harness,
                    defs,
                    result.units,
                    count,
                    concurrency=concurrency,
                    batch=result.batch,
                )
            (result.concurrency if concurrency else result.processes)[count] = got
        # arming must end before the first timer is due, and the timers come in at most at
        # half the speed one worker drains (low load), also on a slow fake
        one, timers = result.processes[1], min(LATE_TIMERS, result.units)
        result.lead = max(LATE_LEAD, 2 * timers * one.seeding / (2 * result.units + 1))
        result.spread = max(LATE_SPREAD, 2 * timers / one.rate)
        with open_harness(target, workdir / "late") as harness:
            late = lateness(harness, defs, timers, lead=result.lead, spread=result.spread)
        result.lateness = late
    except Exception as exc:  # a benchmark reports a broken backend and goes on
        result.error = f"{type(exc).__name__}: {exc}"[:300]
    return result
