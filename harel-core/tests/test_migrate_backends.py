"""``harel migrate`` across backends: a reduced matrix of pairs (the full one is in
``make reliability``), and a ``harel migrate`` process SIGKILLed midway, then run again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from harel.migrate import source_ids, verify
from harel.migrate._testing import HELD, HOLD_AFTER
from harel.migrate.rehearsal import populate, rehearse
from harel.registry import open_store
from harel.store.common.records import record_digest
from harel.store.contract import ExecutionStore

PAIRS = [
    ("memory", "sqlite"),
    ("sqlite", "memory"),
    ("sqlite", "postgres"),
    ("sqlite", "redis"),
    ("postgres", "mongo"),
    ("redis", "dynamodb"),
    ("rqlite", "libsql"),
]
"""Source -> destination pairs run in ``make test``: every backend on at least one side."""

GUARD_SECONDS = 300
"""A hung child is killed after this long (a safety net; no assertion depends on time)."""


@pytest.mark.slow
@pytest.mark.parametrize(("source", "destination"), PAIRS, ids=[f"{s}-{d}" for s, d in PAIRS])
def test_the_runner_finishes_on_the_destination_as_on_the_source(
    open_backend: Callable[[str], tuple[ExecutionStore, str | None]],
    source: str,
    destination: str,
) -> None:
    result = rehearse(open_backend(source)[0], open_backend(destination)[0])
    assert result.problems == []
    assert result.records > 5


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "harel.cli", "migrate", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _records(url: str) -> dict[str, str]:
    store = open_store(url)
    try:
        out = {}
        for key in source_ids(store).ids:
            record = store.export_execution(key)
            assert record is not None
            out[key] = record_digest(record)
        return out
    finally:
        store.close()


@pytest.mark.slow
def test_a_sigkilled_migration_resumes_and_moves_nothing_twice(tmp_path: Path) -> None:
    src_url, dst_url = f"sqlite:///{tmp_path}/src.db", f"sqlite:///{tmp_path}/dst.db"
    src = open_store(src_url)
    populate(src, scale=2)
    total = len(source_ids(src).ids)
    src.close()
    proc = _cli(src_url, dst_url, env={**os.environ, HOLD_AFTER: "3"})
    guard = threading.Timer(GUARD_SECONDS, proc.kill)
    guard.start()
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        while line and not line.startswith(HELD):  # e.g. a plugin warning first
            line = proc.stderr.readline()
        assert line.startswith(f"{HELD} 3"), line
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        guard.cancel()
        proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert len(_records(dst_url)) == 3, "three records imported whole before the kill"
    rerun = _cli(src_url, dst_url)
    out, err = rerun.communicate(timeout=GUARD_SECONDS)
    assert rerun.returncode == 0, err
    assert out.startswith(f"moved {total - 3} record(s)"), out
    assert "3 already in the destination" in out
    assert ": all equal" in out
    assert _records(dst_url) == _records(src_url)
    src, dst = open_store(src_url), open_store(dst_url)
    assert len(dst.pending_outbox()) == len(src.pending_outbox()), "no relay imported twice"
    assert len(dst.pending_spawns()) == len(src.pending_spawns())
    assert verify(src, dst).ok
    src.close()
    dst.close()
