"""The attack suite behind ``make reliability``: races, SIGKILLed writers and workers.

Each attack runs against one :class:`~harel.conformance.harness.StoreHarness` (an isolated
dataset of any installed backend) and returns an :class:`AttackResult` with what it tried and
what it found.  A correct store reports no failure and nothing lost:

* :func:`race_threads`, :func:`race_tasks`, :func:`race_processes` — writers race commits on ONE
  execution; every successful commit must be stored exactly once (version, outbox, trace) and no
  loser's side-write may appear.
* :func:`kill_writer` — a writer process commits steps and is SIGKILLed at a random moment;
  every acknowledged commit must be present and the stored state must be one whole step (its
  snapshot, outbox entries, dedupe marks, timer and trace agree), never a torn one.
* :func:`kill_workers` — ``harel worker`` processes run timers, forks and relays and are
  SIGKILLed mid-run; every timer fires once and every event is processed exactly once.
* :func:`lost_replies` — commits whose request or reply is lost or whose connection is cut
  after forwarding (a fault proxy), with a rival commit in between; the store's answer (after
  re-sends on ``CommitOutcomeUnknown``) must match what is stored.  Needs
  ``harness.server_address()``.

``make test`` runs every attack at a reduced size (conformance/tests/test_reliability.py);
``make reliability`` runs them at full size over every installed backend and writes
``conformance/RELIABILITY.md``.  Process attacks need ``harness.url()`` and the backend's
``persistent`` / ``multi_process`` capabilities.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harel.conformance.harness import StoreHarness
from harel.conformance.proxy import FAULT_MODES, FaultProxy
from harel.model import Event, Execution, Status
from harel.store.contract import AsyncExecutionStore, ExecutionStore, TimerOp
from harel.store.errors import CommitOutcomeUnknown, StoreConflict, StoreUnavailable

_PROCESS_START_SECONDS = 2.0
"""Racing processes start this long after launch, together (interpreter start-up is slower)."""

_SETTLE_ATTEMPTS = 50
_SETTLE_PAUSE = 0.1
"""How long a check waits for a killed writer's in-flight request to land (server backends)."""

RACE_KIND = "Raced"
STEP_KIND = "Step"


@dataclass
class AttackResult:
    """What one attack tried (``runs``, ``inputs``) and what it found (``failures``, ``lost``)."""

    attack: str
    runs: int = 0
    inputs: int = 0
    lost: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when nothing failed and nothing acknowledged was lost."""
        return not self.failures and self.lost == 0


def _race_execution(store: ExecutionStore, execution_id: str) -> None:
    store.trace_max = 0
    store.commit(Execution(id=execution_id, definition_id="race"), [])


def _check_race(
    store: ExecutionStore, execution_id: str, won: list[str], result: AttackResult
) -> None:
    """Every won commit stored exactly once; no loser's side-write; the version counts them."""
    exe = store.load(execution_id)
    if exe is None:
        result.failures.append(f"{execution_id}: execution missing after the race")
        result.lost += len(won)
        return
    if exe.version != 1 + len(won):
        result.failures.append(
            f"{execution_id}: version {exe.version}, expected {1 + len(won)} "
            f"(1 create + {len(won)} won commits)"
        )
    emitted = [
        entry.event.id
        for entry in store.pending_outbox()
        if entry.target_id == execution_id and entry.event.kind == RACE_KIND
    ]
    missing = set(won) - set(emitted)
    extra = set(emitted) - set(won)
    result.lost += len(missing)
    if missing:
        result.failures.append(f"{execution_id}: {len(missing)} won commit(s) lost their emit")
    if extra:
        result.failures.append(f"{execution_id}: {len(extra)} loser side-write(s) visible")
    if len(emitted) != len(set(emitted)):
        result.failures.append(f"{execution_id}: an emit was stored twice")
    steps = [s for s in store.read_trace(execution_id) if s.get("event_kind") == RACE_KIND]
    if len(steps) != len(won):
        result.failures.append(f"{execution_id}: {len(steps)} trace steps for {len(won)} wins")


def _race_one(
    store: ExecutionStore, execution_id: str, tag: str, wins: int, attempts: list[int]
) -> list[str]:
    """Commit ``wins`` times on ``execution_id``, reloading after every lost CAS."""
    won: list[str] = []
    attempt = 0
    while len(won) < wins:
        attempt += 1
        exe = store.load(execution_id)
        if exe is None:
            raise AssertionError(f"{execution_id} vanished during the race")
        event_id = f"{tag}-{attempt}"
        try:
            store.commit(
                exe,
                [(execution_id, Event(id=event_id, kind=RACE_KIND))],
                trace={"event_kind": RACE_KIND, "by": tag},
            )
        except (StoreConflict, StoreUnavailable):
            continue
        won.append(event_id)
    attempts.append(attempt)
    return won


def race_threads(harness: StoreHarness, *, writers: int, wins: int) -> AttackResult:
    """``writers`` threads, each with its own store object, race ``wins`` commits each."""
    result = AttackResult("race: threads")
    started = time.perf_counter()
    stores = [harness.open_sync() for _ in range(writers)]
    try:
        execution_id = f"race-threads-{random.getrandbits(32):08x}"
        _race_execution(stores[0], execution_id)
        for store in stores:
            store.trace_max = 0
        won: list[str] = []
        attempts: list[int] = []
        errors: list[BaseException] = []
        barrier = threading.Barrier(writers)

        def run(index: int) -> None:
            try:
                barrier.wait()
                won.extend(_race_one(stores[index], execution_id, f"t{index}", wins, attempts))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        result.failures.extend(f"writer raised {exc!r}" for exc in errors)
        result.runs, result.inputs = 1, sum(attempts)
        _check_race(stores[0], execution_id, won, result)
    finally:
        for store in stores:
            store.close()
    result.seconds = time.perf_counter() - started
    return result


async def _arace_one(
    store: AsyncExecutionStore, execution_id: str, tag: str, wins: int, attempts: list[int]
) -> list[str]:
    won: list[str] = []
    attempt = 0
    while len(won) < wins:
        attempt += 1
        exe = await store.load(execution_id)
        if exe is None:
            raise AssertionError(f"{execution_id} vanished during the race")
        event_id = f"{tag}-{attempt}"
        try:
            await store.commit(
                exe,
                [(execution_id, Event(id=event_id, kind=RACE_KIND))],
                trace={"event_kind": RACE_KIND, "by": tag},
            )
        except (StoreConflict, StoreUnavailable):
            await asyncio.sleep(0)
            continue
        won.append(event_id)
    attempts.append(attempt)
    return won


def race_tasks(harness: StoreHarness, *, writers: int, wins: int) -> AttackResult:
    """``writers`` asyncio tasks on ONE async store object race ``wins`` commits each."""
    result = AttackResult("race: tasks")
    started = time.perf_counter()
    execution_id = f"race-tasks-{random.getrandbits(32):08x}"

    async def main() -> list[str]:
        store = await harness.open_async()
        try:
            store.trace_max = 0
            await store.commit(Execution(id=execution_id, definition_id="race"), [])
            attempts: list[int] = []
            outcomes = await asyncio.gather(
                *(_arace_one(store, execution_id, f"a{i}", wins, attempts) for i in range(writers)),
                return_exceptions=True,
            )
            result.inputs = sum(attempts)
        finally:
            await store.close()
        won: list[str] = []
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                result.failures.append(f"task raised {outcome!r}")
            else:
                won.extend(outcome)
        return won

    won = asyncio.run(main())
    result.runs = 1
    check = harness.open_sync()
    try:
        _check_race(check, execution_id, won, result)
    finally:
        check.close()
    result.seconds = time.perf_counter() - started
    return result


_RACE_SCRIPT = """
import json, sys, time
from harel.conformance.attacks import _race_one
from harel.registry import open_store
url, execution_id, tag, wins = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = open_store(url)
store.trace_max = 0
time.sleep(max(0.0, float(sys.argv[5]) - time.time()))  # every writer starts together
attempts = []
won = _race_one(store, execution_id, tag, wins, attempts)
store.close()
print(json.dumps({"won": won, "attempts": attempts[0]}))
"""


def race_processes(harness: StoreHarness, *, writers: int, wins: int) -> AttackResult:
    """``writers`` processes race ``wins`` commits each on one execution (multi_process)."""
    result = AttackResult("race: processes")
    started = time.perf_counter()
    url = _require_url(harness)
    execution_id = f"race-procs-{random.getrandbits(32):08x}"
    check = harness.open_sync()
    try:
        _race_execution(check, execution_id)
        start_at = str(time.time() + _PROCESS_START_SECONDS)
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _RACE_SCRIPT,
                    url,
                    execution_id,
                    f"p{i}",
                    str(wins),
                    start_at,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(writers)
        ]
        won: list[str] = []
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            if proc.returncode != 0:
                result.failures.append(f"writer process exited {proc.returncode}: {err[-500:]}")
                continue
            report = json.loads(out.strip().splitlines()[-1])
            won.extend(report["won"])
            result.inputs += int(report["attempts"])
        result.runs = 1
        _check_race(check, execution_id, won, result)
    finally:
        check.close()
    result.seconds = time.perf_counter() - started
    return result


_KILL_SCRIPT = """
import sys
from harel.conformance.attacks import write_steps_forever
write_steps_forever(sys.argv[1], sys.argv[2])
"""


def step_commit(store: ExecutionStore, exe: Execution) -> int:
    """Commit step ``exe.version + 1`` of a kill run: snapshot, emit, dedupe mark, timer, trace.

    Every part of step ``k`` names ``k``, so a torn commit is visible afterwards.
    """
    k = exe.version + 1
    exe.context["step"] = k
    store.commit(
        exe,
        [(exe.id, Event(id=f"{exe.id}/{k}", kind=STEP_KIND))],
        processed_event_id=f"{exe.id}/in/{k}",
        timers=[TimerOp.schedule("T", float(k))],
        trace={"event_kind": STEP_KIND, "k": k},
    )
    return k


def write_steps_forever(url: str, execution_id: str) -> None:
    """The victim of :func:`kill_writer`: print each step number once its commit returned."""
    from harel.registry import open_store

    store = open_store(url)
    store.trace_max = 0
    exe = store.load(execution_id) or Execution(id=execution_id, definition_id="kill")
    while True:
        k = step_commit(store, exe)
        sys.stdout.write(f"{k}\n")
        sys.stdout.flush()


def _check_step_state(
    store: ExecutionStore, execution_id: str, acked: int, result: AttackResult
) -> None:
    """Compare the stored step with every part of it, once the dataset has settled.

    A server may still apply the killed writer's last request after the process is gone, so
    the parts are read between two loads of the execution and read again until both loads
    agree: what is compared is one consistent moment, never a commit landing mid-check.
    """
    for _ in range(_SETTLE_ATTEMPTS):
        before = store.load(execution_id)
        torn = _torn_parts(store, execution_id, 0 if before is None else before.version)
        after = store.load(execution_id)
        if (before is None) == (after is None) and (
            before is None or after is None or before.version == after.version
        ):
            break
        time.sleep(_SETTLE_PAUSE)
    stored = 0 if after is None else after.version
    if stored < acked:
        result.lost += acked - stored
        result.failures.append(f"{execution_id}: acknowledged step {acked}, stored {stored}")
        return
    if stored > acked + 1:
        result.failures.append(f"{execution_id}: stored step {stored} was never attempted")
    if after is not None and after.context.get("step") != stored:
        torn.insert(0, f"snapshot step {after.context.get('step')}")
    if torn:
        result.failures.append(f"{execution_id}: torn step {stored}: {'; '.join(torn)}")


def _torn_parts(store: ExecutionStore, execution_id: str, stored: int) -> list[str]:
    """The parts of step ``stored`` (and of no later step) that are missing or extra."""
    torn: list[str] = []
    emitted = sorted(
        int(entry.event.id.rsplit("/", 1)[1])
        for entry in store.pending_outbox()
        if entry.target_id == execution_id
    )
    if emitted != list(range(1, stored + 1)):
        torn.append(f"outbox steps {emitted[-3:]}")
    if stored and not store.is_processed(execution_id, f"{execution_id}/in/{stored}"):
        torn.append("dedupe mark of the stored step missing")
    if store.is_processed(execution_id, f"{execution_id}/in/{stored + 1}"):
        torn.append("dedupe mark of an unstored step present")
    timers = [t for t in store.due_timers(1e300) if t[0] == execution_id]
    if timers != ([(execution_id, "T", float(stored))] if stored else []):
        torn.append(f"timers {timers}")
    trace = store.read_trace(execution_id)
    if [step.get("k") for step in trace] != list(range(1, stored + 1)):
        torn.append(f"trace of {len(trace)} steps")
    return torn


def kill_writer(
    harness: StoreHarness, *, runs: int, max_delay: float = 0.3, seed: int | None = None
) -> AttackResult:
    """SIGKILL a committing writer process ``runs`` times at random moments and inspect."""
    result = AttackResult("SIGKILLed writer")
    started = time.perf_counter()
    url = _require_url(harness)
    rng = random.Random(seed)
    check = harness.open_sync()
    check.trace_max = 0
    try:
        for run in range(runs):
            execution_id = f"kill-{run}-{rng.getrandbits(32):08x}"
            proc = subprocess.Popen(
                [sys.executable, "-c", _KILL_SCRIPT, url, execution_id],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            first = proc.stdout.readline()  # the writer is up and has committed once
            if not first:
                _, err = proc.communicate(timeout=60)
                result.failures.append(f"writer died before its first commit: {err[-500:]}")
                continue
            time.sleep(rng.uniform(0, max_delay))
            proc.send_signal(signal.SIGKILL)
            rest, _ = proc.communicate(timeout=60)
            lines = [first, *rest.splitlines()]
            acked = max(int(line) for line in lines if line.strip().isdigit())
            result.runs += 1
            result.inputs += acked
            _check_step_state(check, execution_id, acked, result)
            check.purge(execution_id, force=True)
    finally:
        check.close()
    result.seconds = time.perf_counter() - started
    return result


# -- harel worker processes killed mid-run -----------------------------------------------------

WORKER_MACHINES = """
event Tick {}
machine job {
  initial Arm
  state Arm { timeout 5 }
  orthogonal Split {
    state Left  { initial L1  state L1 { on enter tick }  final L2 success {}  from L1 to L2 }
    state Right { initial R  final R success {} }
  }
  final Done success {}
  from Arm to Split on Timeout
  from Split to Done
}
machine counter {
  initial Even
  state Even { on enter bump }
  state Odd  { on enter bump }
  from Even to Odd on Tick
  from Odd to Even on Tick
}
"""
"""Jobs arm a timer, fork two regions, one region sends a Tick to the shared counter."""

WORKER_ACTIONS = """
from harel import Event


def tick(stm, event, **_):
    stm.send("counter", Event(id="tick-" + stm.execution_id, kind="Tick"))


def bump(stm, event, **_):
    if event is not None:
        stm.execution_ctx["n"] = stm.execution_ctx.get("n", 0) + 1
        stm.execution_ctx.setdefault("seen", []).append(event.id)
"""


def worker_definitions() -> dict[str, Any]:
    """The ``job`` and ``counter`` definitions of :data:`WORKER_MACHINES`, bound to the actions
    of :data:`WORKER_ACTIONS` (for in-process runners and workers)."""
    from harel.engine.dsl import definition_from_dsl

    namespace: dict[str, Any] = {}
    exec(compile(WORKER_ACTIONS, "<harel worker actions>", "exec"), namespace)
    actions = {"tick": namespace["tick"], "bump": namespace["bump"]}
    return {n: definition_from_dsl(WORKER_MACHINES, n, actions=actions) for n in ("job", "counter")}


def _load_actions(path: Path) -> dict[str, Callable[..., Any]]:
    """The actions module the workers import, loaded from the same file by the seeding runner."""
    spec = importlib.util.spec_from_file_location("attack_actions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {"tick": module.tick, "bump": module.bump}


def kill_workers(
    harness: StoreHarness,
    workdir: Path,
    *,
    jobs: int,
    kills: int,
    workers: int = 2,
    seed: int | None = None,
    stall_limit: float = 120.0,
    lease: float = 2.0,
    stalls: int = 0,
    batch: int = 5,
) -> AttackResult:
    """Run ``workers`` ``harel worker`` processes (claiming under ``lease``-second leases) over
    ``jobs`` jobs, SIGKILL one ``kills`` times (a fresh worker replaces it each time) and
    SIGSTOP one ``stalls`` times for longer than a lease (its leases are taken over; it
    resumes mid-step), then check every timer fired once, every Tick reached the counter
    exactly once and no child was spawned twice.  Each worker claims ``batch`` groups at a
    time: a claim must take well under a lease (a claim of many groups on a slow store can
    outlast a 2-second lease, and a worker gives up a claim whose lease it lost).  No fixed
    deadline (backends differ a lot in
    speed): the attack fails when the work makes no progress (no step of any of its executions
    is committed) for ``stall_limit`` seconds."""
    from harel.engine.dsl import definition_from_dsl
    from harel.engine.runner import DurableRunner

    result = AttackResult("SIGKILLed workers")
    started = time.perf_counter()
    url = _require_url(harness)
    rng = random.Random(seed)
    defs_dir = workdir / "defs"
    defs_dir.mkdir(parents=True, exist_ok=True)
    (defs_dir / "jobs.stm").write_text(WORKER_MACHINES)
    (workdir / "attack_actions.py").write_text(WORKER_ACTIONS)
    actions = _load_actions(workdir / "attack_actions.py")
    defs = {n: definition_from_dsl(WORKER_MACHINES, n, actions=actions) for n in ("job", "counter")}
    store = harness.open_sync()
    seeder = DurableRunner(store, defs, clock=lambda: 0.0, trace=True, trace_max=0)
    seeder.create("counter", execution_id="counter")
    for i in range(jobs):
        seeder.create("job", execution_id=f"job-{i:04d}")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(workdir), os.environ.get("PYTHONPATH", "")]),
        "STM_TRACE": "1",
        "STM_TRACE_MAX": "0",
    }
    command = [
        *(sys.executable, "-m", "harel.cli", "worker", "--store", url),
        *("--definitions", str(defs_dir), "--actions", "attack_actions", "--poll", "0.02"),
        *("--lease", repr(lease), "--batch", str(batch)),
    ]

    def spawn() -> subprocess.Popen[str]:
        return subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )

    procs = [spawn() for _ in range(workers)]
    try:
        kill_at = sorted(rng.uniform(0.5, 3.0) for _ in range(kills))
        stall_at = sorted(rng.uniform(0.3, 2.0) for _ in range(stalls))
        stalled: list[tuple[float, subprocess.Popen[str]]] = []
        begin = time.monotonic()
        progress, progressed_at, looked_at = -1, 0.0, -PROGRESS_EVERY
        while kill_at or stall_at or stalled or not _workers_done(store, jobs):
            now = time.monotonic() - begin
            if now - looked_at >= PROGRESS_EVERY:
                looked_at, seen = now, _progress(store, jobs)
                if seen != progress:
                    progress, progressed_at = seen, now
                elif now - progressed_at > stall_limit:
                    result.failures.append(
                        f"no progress for {stall_limit:.0f} s ({_finished_jobs(store)} of "
                        f"{jobs} jobs done after {now:.0f} s)"
                    )
                    break
            if stall_at and now >= stall_at[0]:
                stall_at.pop(0)
                sleeper = procs[rng.randrange(len(procs))]
                if all(sleeper is not proc for _, proc in stalled):
                    sleeper.send_signal(signal.SIGSTOP)
                    stalled.append((now + lease * 1.5, sleeper))
                    result.runs += 1
            for resume_at, proc in [item for item in stalled if now >= item[0]]:
                stalled.remove((resume_at, proc))
                proc.send_signal(signal.SIGCONT)
            if kill_at and now >= kill_at[0]:
                kill_at.pop(0)
                victim = rng.randrange(len(procs))
                procs[victim].send_signal(signal.SIGKILL)
                procs[victim].communicate(timeout=60)
                procs[victim] = spawn()
                result.runs += 1
            crashed = next((proc for proc in procs if proc.poll() is not None), None)
            if crashed is not None:
                _, err = crashed.communicate()
                result.failures.append(f"a worker exited {crashed.returncode}: {err[-500:]}")
                break
            time.sleep(0.05)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
    result.inputs = jobs
    if not result.failures:
        _check_workers(store, jobs, result)
    store.close()
    result.seconds = time.perf_counter() - started
    return result


PROGRESS_EVERY = 2.0
"""Seconds between two looks at the fleet attack's progress (each lists the executions)."""


def _progress(store: ExecutionStore, jobs: int) -> int:
    """A number that grows with every step any worker commits: the versions of every
    execution of the attack, summed (jobs, their children and the counter)."""
    page = store.list_executions(limit=min(jobs * 3 + 1, 1000))
    return sum(item.version for item in page.items)


def _finished_jobs(store: ExecutionStore) -> int:
    """How many Ticks reached the counter so far (the attack's measure of progress)."""
    counter = store.load("counter")
    return 0 if counter is None else int(counter.context.get("n", 0))


def _workers_done(store: ExecutionStore, jobs: int) -> bool:
    counter = store.load("counter")
    if counter is None or counter.context.get("n", 0) < jobs:
        return False
    page = store.list_executions(
        status=[Status.DONE], definition_id="job", roots_only=True, limit=jobs + 1
    )
    return len(page.items) == jobs


def _check_workers(store: ExecutionStore, jobs: int, result: AttackResult) -> None:
    counter = store.load("counter")
    seen: list[str] = [] if counter is None else list(counter.context.get("seen", []))
    expected = [f"tick-job-{i:04d}:Split.Left:0" for i in range(jobs)]
    missing = set(expected) - set(seen)
    result.lost += len(missing)
    if missing:
        result.failures.append(f"{len(missing)} Tick(s) never processed")
    if len(seen) != len(set(seen)):
        result.failures.append(f"{len(seen) - len(set(seen))} Tick(s) processed twice")
    for i in range(jobs):
        job_id = f"job-{i:04d}"
        kinds = [step.get("event_kind") for step in store.read_trace(job_id)]
        if kinds.count("Timeout") != 1:
            result.failures.append(f"{job_id}: timer fired {kinds.count('Timeout')} times")
    if store.due_timers(1e300):
        result.failures.append("timers still armed after every job finished")
    if store.pending_outbox() or store.pending_spawns():
        result.failures.append("relays still pending after every job finished")
    listed = store.list_executions(limit=1 + jobs * 3 + 1).items
    if len(listed) != 1 + jobs * 3:
        result.failures.append(f"{len(listed)} executions stored, expected {1 + jobs * 3}")


LOST_REPLY_RESENDS = 3
"""Re-sends after ``CommitOutcomeUnknown`` before a lost-reply trial counts as unsettled."""


def rival_commit(store: ExecutionStore, execution_id: str) -> None:
    """Another writer's commit on a connection of its own (run on a fault proxy's thread while
    a broken commit waits); losing to the broken commit, if it landed first, is legal too."""
    other = store.load(execution_id)
    if other is not None:
        other.context = {"by": "rival"}
        with contextlib.suppress(StoreConflict):
            store.commit(other, [(None, Event(id=f"{execution_id}:rival", kind=STEP_KIND))])


def _lost_reply_trial(
    harness: StoreHarness, proxy: FaultProxy, rival: ExecutionStore, trial: int, rng: random.Random
) -> tuple[str, str | None]:
    """One broken commit; (the store's answer, a failure or ``None``)."""
    mode = rng.choice(FAULT_MODES)
    with_rival = rng.random() < 0.5
    execution_id = f"lost-{trial}-{rng.getrandbits(32):08x}"
    marker = f"{execution_id}:marker"
    store = harness.open_sync_at(proxy.host, proxy.port)
    try:
        exe = Execution(id=execution_id, definition_id="lost")
        store.commit(exe, [])
        proxy.arm(
            mode,
            marker=marker.encode(),
            between=(lambda: rival_commit(rival, execution_id)) if with_rival else None,
        )
        exe.context = {"n": 1}
        answer = "unknown"
        for _ in range(LOST_REPLY_RESENDS + 1):
            try:
                store.commit(exe, [(None, Event(id=marker, kind=STEP_KIND))])
            except CommitOutcomeUnknown:
                continue
            except StoreConflict:
                answer = "conflict"
            except StoreUnavailable:
                answer = "unavailable"
            else:
                answer = "stored"
            break
    finally:
        store.close()
    where = f"trial {trial} ({mode}, {'rival' if with_rival else 'alone'})"
    if not proxy.wait_fired(30.0):
        return answer, f"{where}: the commit never carried its marker"
    copies = sum(entry.event.id == marker for entry in rival.pending_outbox())
    if answer == "unknown":
        return answer, f"{where}: still unknown after {LOST_REPLY_RESENDS} re-sends"
    if answer == "stored" and copies != 1:
        return answer, f"{where}: answered success, stored {copies} time(s)"
    if answer != "stored" and copies:
        return answer, f"{where}: answered {answer}, but the step is stored"
    return answer, None


def lost_replies(harness: StoreHarness, *, trials: int, seed: int | None = None) -> AttackResult:
    """Commits whose request or reply is lost (:class:`~harel.conformance.proxy.FaultProxy`),
    with a rival commit in between half the time; every answer must match what is stored.

    ``inputs`` counts the commits answered "stored"; ``lost`` counts misreported outcomes.
    Needs ``harness.server_address()`` (a store that talks to a TCP server)."""
    result = AttackResult("lost replies")
    address = harness.server_address()
    if address is None:
        raise ValueError(f"{harness.describe()}: this attack needs harness.server_address()")
    started = time.perf_counter()
    rng = random.Random(seed)
    rival = harness.open_sync()
    try:
        with FaultProxy(*address) as proxy:
            for trial in range(trials):
                answer, failure = _lost_reply_trial(harness, proxy, rival, trial, rng)
                result.runs += 1
                result.inputs += answer == "stored"
                if failure is not None:
                    result.failures.append(failure)
                    result.lost += "stored" in failure or "answered" in failure
    finally:
        rival.close()
    result.seconds = time.perf_counter() - started
    return result


def _require_url(harness: StoreHarness) -> str:
    url = harness.url()
    if url is None:
        raise ValueError(
            f"{harness.describe()}: this attack runs other processes and needs harness.url()"
        )
    return url


__all__ = [
    "AttackResult",
    "kill_workers",
    "kill_writer",
    "lost_replies",
    "race_processes",
    "race_tasks",
    "race_threads",
    "step_commit",
    "write_steps_forever",
]
