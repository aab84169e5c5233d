"""The worker loop, the engine's env config, and three ``harel worker`` processes on one store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harel import DictStore, DurableRunner, Event, Status, definition_from_dsl
from harel.conformance import usable_backend_names
from harel.conformance.attacks import WORKER_ACTIONS, WORKER_MACHINES
from harel.engine.config import ConfigError, EngineConfig
from harel.engine.dsl import definitions_from_dir
from harel.engine.worker import Worker
from harel.registry import open_store
from harel.store.errors import StoreUnavailable

JOBS = WORKER_MACHINES
"""Jobs arm a timer, fork two regions, one region sends a Tick to the shared counter (the same
machines the reliability attack kills workers over)."""
ACTIONS = WORKER_ACTIONS


def tick(stm: Any, event: Event | None, **_: Any) -> None:
    stm.send("counter", Event(id="tick-" + stm.execution_id, kind="Tick"))


def bump(stm: Any, event: Event | None, **_: Any) -> None:
    if event is not None:
        stm.execution_ctx["n"] = stm.execution_ctx.get("n", 0) + 1
        stm.execution_ctx.setdefault("seen", []).append(event.id)


def _defs() -> dict[str, Any]:
    actions = {"tick": tick, "bump": bump}
    return {n: definition_from_dsl(JOBS, n, actions=actions) for n in ("job", "counter")}


def _seed(runner: DurableRunner, jobs: int) -> None:
    runner.create("counter", execution_id="counter")
    for i in range(jobs):
        runner.create("job", execution_id=f"job-{i:03d}")


def test_worker_rounds_drain_everything() -> None:
    store = DictStore()
    _seed(DurableRunner(store, _defs(), clock=lambda: 0.0), 5)
    worker = Worker(DurableRunner(store, _defs(), clock=lambda: 100.0), poll=0)
    assert worker.run_round() > 0
    stats = worker.run(once=True)
    assert stats.rounds == 2 and stats.fired == 5
    assert store.load("counter").context["n"] == 5
    assert all(store.load(f"job-{i:03d}").status is Status.DONE for i in range(5))


def test_worker_stops_when_asked_and_survives_busy_store() -> None:
    class Busy:
        def __init__(self, inner: Any) -> None:
            self.inner, self.calls = inner, 0

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def claim(self, *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == 1:
                raise StoreUnavailable("database is locked")
            if self.calls == 3:
                worker.stop()
            return self.inner.claim(*args, **kwargs)

    store = Busy(DictStore())
    worker = Worker(DurableRunner(store, _defs()), poll=0)  # type: ignore[arg-type]
    stats = worker.run()
    assert worker.stopping and stats.unavailable == 1 and stats.rounds >= 2
    with pytest.raises(ValueError, match="poll"):
        Worker(DurableRunner(DictStore(), {}), poll=-1)


def test_a_store_that_cannot_claim_is_swept() -> None:
    """A server that refuses claims (``StoreConfigError``, e.g. rqlite before 8) is swept."""
    from harel.store.errors import StoreConfigError

    class Refusing:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def claim(self, *args: Any, **kwargs: Any) -> Any:
            raise StoreConfigError("this node has no /db/request: claims need rqlite 8")

    store = DictStore()
    _seed(DurableRunner(store, _defs(), clock=lambda: 0.0), 2)
    worker = Worker(DurableRunner(Refusing(store), _defs(), clock=lambda: 100.0), poll=0)  # type: ignore[arg-type]
    assert worker.claiming and worker.run_round() == 0 and not worker.claiming
    assert worker.run(once=True).fired == 2


def test_a_store_without_claims_is_swept() -> None:
    """A third-party store written before claims (no ``claim``) gets the sweeping rounds."""

    class Sweeping:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            if name in ("claim", "renew", "release"):
                raise AttributeError(name)
            return getattr(self.inner, name)

    store = DictStore()
    _seed(DurableRunner(store, _defs(), clock=lambda: 0.0), 3)
    worker = Worker(DurableRunner(Sweeping(store), _defs(), clock=lambda: 100.0), poll=0)  # type: ignore[arg-type]
    assert not worker.claiming
    worker.run_round()
    assert worker.run(once=True).fired == 3
    assert store.load("counter").context["n"] == 3


def test_engine_config_from_env(tmp_path: Path) -> None:
    assert EngineConfig.from_env({}) == EngineConfig(False, 200, None)
    config = EngineConfig.from_env(
        {"STM_TRACE": " Yes ", "STM_TRACE_MAX": "7", "STM_DEFINITIONS_DIR": str(tmp_path)}
    )
    assert config == EngineConfig(True, 7, tmp_path)
    assert not EngineConfig.from_env({"STM_TRACE": "0"}).trace
    assert not EngineConfig.from_env({"STM_TRACE": "nope"}).trace
    for bad in ("ten", "-1", "1.5"):
        with pytest.raises(ConfigError, match="STM_TRACE_MAX"):
            EngineConfig.from_env({"STM_TRACE_MAX": bad})


def test_sqlite_is_among_theusable_backend_names(multi_process=True) -> None:
    assert "sqlite" in usable_backend_names(multi_process=True)


@pytest.mark.slow
@pytest.mark.parametrize("backend", usable_backend_names(multi_process=True))
def test_three_worker_processes_share_one_store(
    backend: str, tmp_path: Path, isolated_url: Callable[[str], str]
) -> None:
    # moto (the DynamoDB test server) copies its table on every transaction: fewer jobs there
    jobs = 20 if backend == "dynamodb" else 60
    defs_dir = tmp_path / "defs"
    defs_dir.mkdir()
    (defs_dir / "jobs.stm").write_text(JOBS)
    (tmp_path / "worker_actions.py").write_text(ACTIONS)
    assert set(definitions_from_dir(defs_dir, actions={"tick": tick, "bump": bump})) == {
        "job",
        "counter",
    }
    url = isolated_url(backend)
    store = open_store(url)
    # created "in the past": every Arm timer (fire_at 5.0) is due for the real-time workers
    _seed(DurableRunner(store, _defs(), clock=lambda: 0.0, trace=True, trace_max=0), jobs)
    assert len(store.due_timers(10.0)) == jobs

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        "STM_TRACE": "1",
        "STM_TRACE_MAX": "0",
    }
    command = [
        *(sys.executable, "-m", "harel.cli", "worker"),
        *("--store", url, "--definitions", str(defs_dir)),
        *("--actions", "worker_actions", "--poll", "0.05"),
    ]
    workers = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    try:
        # no fixed deadline (backends differ a lot in speed): wait while the work progresses
        progress, stalled_since = -1, time.monotonic()
        while time.monotonic() - stalled_since < 60:
            counter = store.load("counter")
            done = 0 if counter is None else counter.context.get("n", 0)
            if done >= jobs and _all_done(store, jobs):
                break
            if done != progress:
                progress, stalled_since = done, time.monotonic()
            assert all(w.poll() is None for w in workers), [w.communicate() for w in workers]
            time.sleep(0.1)
        # A fast backend can finish before every worker's interpreter has started: wait for
        # each one's banner (printed once it runs) so the SIGTERM tests the worker, not Python.
        banners = [worker.stdout.readline() if worker.stdout else "" for worker in workers]
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        outputs = [
            (banner + out, err)
            for banner, (out, err) in zip(
                banners, (worker.communicate(timeout=30) for worker in workers), strict=True
            )
        ]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    for worker, (out, err) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, err
        assert "stopped after" in out and "Traceback" not in err

    counter = store.load("counter")
    assert counter.context["n"] == jobs  # every emitted Tick took effect exactly once
    assert sorted(counter.context["seen"]) == [
        f"tick-job-{i:03d}:Split.Left:0" for i in range(jobs)
    ]
    assert counter.version == jobs + 1
    for i in range(jobs):
        job_id = f"job-{i:03d}"
        kinds = [step["event_kind"] for step in store.read_trace(job_id)]
        assert kinds == ["Start", "Timeout", "Finished", "Finished"], job_id
        children = store.load(job_id).children
        assert len(children) == 2 and all(child.finished for child in children.values())
    assert store.due_timers(1e18) == []
    assert store.pending_outbox() == [] and store.pending_spawns() == []
    listed = store.list_executions(limit=1000).items
    assert len(listed) == 1 + jobs * 3  # no duplicate children
    store.close()


def _all_done(store: Any, jobs: int) -> bool:
    page = store.list_executions(
        status=[Status.DONE], definition_id="job", roots_only=True, limit=1000
    )
    return len(page.items) == jobs
