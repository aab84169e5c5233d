"""Smoke checks of figure 7 and of figure 1's runner columns (run with ``pytest bench``; not
part of ``make test``): a tiny slow-network workload over each TCP backend installed here, an
embedded backend listed as having no network, and the report's marks."""

from __future__ import annotations

import tempfile
from pathlib import Path

import latency
import pytest
import roundtrips
from common import QUICK, Target, targets
from report import Results, render

NETWORKED = [
    t
    for t in targets(Path(tempfile.gettempdir(), "harel-bench-tests"), every_setting=False)
    if t.backend in ("postgres", "redis")
]
TINY = latency.Workload(executions=2, events=2, rounds=2, budget=30.0)


@pytest.mark.parametrize("target", NETWORKED, ids=lambda t: t.backend)
def test_latency_counts_both_sides_over_the_slow_proxy(target: Target, tmp_path: Path) -> None:
    got = latency.measure(target, tmp_path, QUICK, TINY)
    assert got.error is None and got.how == ""
    assert got.events == {"before": 8, "after": 8}
    assert got.per_event("before") == 2.0  # load_for_event + commit, one round trip each
    after = got.per_event("after")
    assert after is not None and after < 2.0  # stepped from the kept copy: no load
    assert got.ratio is not None and got.ratio > 0


def test_latency_lists_an_embedded_backend_as_no_network(tmp_path: Path) -> None:
    got = latency.measure(Target("memory", "memory://"), tmp_path, QUICK, TINY)
    assert got.error is None
    assert got.how == latency.NO_NETWORK and not got.events


def test_the_report_marks_runner_roundtrip_misses_and_renders_latency() -> None:
    counts = {op: 1 for op in roundtrips.OPERATIONS}
    slow = dict(counts, **{"runner.process": 2, "runner.process unseen": 2})
    rt = roundtrips.RoundTrips(Target("postgres", "postgresql://"), how="proxy round trips")
    rt.counts = {"sync": slow, "async": counts}
    lat = latency.Latency(Target("redis", "redis://"))
    lat.events = {"before": 100, "after": 100}
    lat.seconds = {"before": 2.0, "after": 1.0}
    lat.round_trips = {"before": 200, "after": 100}
    embedded = latency.Latency(Target("sqlite", "sqlite://"), how=latency.NO_NETWORK)
    results = Results(QUICK, "test", "now", roundtrips=[rt], latency=[lat, embedded])
    text = render(results)
    assert results.misses == ["round trips: postgres sync runner.process takes 2 (> 1)"]
    assert "| create ≤ 1, process ≤ 1 | ✗ |" in text and "| create ≤ 1, process ≤ 1 | ✓ |" in text
    assert "## 7. Events per second over a slow network" in text
    assert "| redis | 100 | 50 | 100 | 2.00x | 2.00 | 1.00 |" in text
    assert "| sqlite | no network |" in text
