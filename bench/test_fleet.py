"""Smoke checks of figure 6 (run with ``pytest bench``; not part of ``make test``): a tiny
drain by two ``harel worker`` processes over a SQLite file, a few late timers, the store check
that catches a double delivery, and the report's marks."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import fleet
import pytest
from common import QUICK, Target
from harel.conformance.harness import StoreHarness
from harel.model import Event
from harel.registry import harness_for_url
from report import Results, render


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[StoreHarness]:
    opened = harness_for_url(f"sqlite:///{tmp_path / 'fleet.db'}", tmp_path)
    try:
        yield opened
    finally:
        opened.destroy()


def test_two_workers_drain_everything_once_and_timers_fire_late_never_early(
    harness: StoreHarness, tmp_path: Path
) -> None:
    defs = fleet.write_definitions(tmp_path)
    got = fleet.drain(harness, defs, 10, 2, concurrency=False, batch=100)
    assert got.units == 20
    assert got.delivered == 20  # the workers' own counts add up to the units, none twice
    assert got.wasted >= 0 and 0 < got.span <= got.wall
    late = fleet.lateness(harness, defs, 5, lead=0.4, spread=0.2)
    assert len(late) == 5
    assert all(ms >= 0 for ms in late)  # a timer never fires before its fire_at


def test_verify_catches_a_second_delivery(harness: StoreHarness) -> None:
    store = harness.open_sync()
    try:
        fleet.seed(store, 3, time.time())
        runner = fleet._runner(store, time.time())
        runner.run_until_idle()
        fleet.verify(store, 3)  # drained: one Ping each, every timer fired
        runner.process("e-00001", Event(id="ping-again", kind="Ping"))
        with pytest.raises(fleet.FleetFailure, match="1 of 3 events not delivered exactly once"):
            fleet.verify(store, 3)
    finally:
        store.close()


def test_the_report_marks_a_fleet_that_slows_down() -> None:
    slow = fleet.Fleet(Target("postgres", "postgresql://"), units=10)
    for n, span in zip(fleet.WORKERS, (1.0, 0.8, 1.5, 0.4), strict=True):
        slow.processes[n] = fleet.Drain(20, span, span + 1, 20, 2 if n == 8 else 0)
    slow.lateness = [1.0, 2.0, 80.0]
    results = Results(QUICK, "test", "now", fleet=[slow])
    text = render(results)
    assert "## 6. A fleet of workers" in text
    assert any("slower with 4 workers" in miss for miss in results.misses)
    assert any("4 workers = 0.67x" in miss for miss in results.misses)
    assert any("wasted 0.100" in miss for miss in results.misses)
    assert any("lateness p99" in miss for miss in results.misses)
