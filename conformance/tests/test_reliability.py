"""The reliability attacks (harel.conformance.attacks) at a reduced size, on every backend.

``make reliability`` runs the same attacks at full size and writes conformance/RELIABILITY.md;
a backend joins both by being installed (its harness and ``local_url`` or
``HAREL_TEST_<NAME>_URL``), with nothing to add here.  The migration matrix of
``make reliability`` (every ordered pair of backends) is checked here on one pair.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from harel.conformance import attacks, backend_test_url_or_skip, usable_backend_names
from harel.conformance.harness import StoreHarness
from harel.registry import harness_for_url


def _harness(backend: str, tmp_path: Path) -> Iterator[StoreHarness]:
    url = backend_test_url_or_skip(backend, tmp_path / "data")
    harness = harness_for_url(url, tmp_path / "kit")
    yield harness
    harness.destroy()


@pytest.fixture(params=usable_backend_names())
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreHarness]:
    """Every installed backend."""
    yield from _harness(request.param, tmp_path)


@pytest.fixture(params=usable_backend_names(multi_process=True))
def shared_harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreHarness]:
    """Every installed backend whose data several processes may share.

    A backend whose TEST dataset lives in this process (MongoDB over mongomock) declares so
    through its harness (no ``url()``, ``multi_process`` off) and is skipped, saying why.
    """
    for harness in _harness(request.param, tmp_path):
        if harness.url() is None or not harness.capabilities.multi_process:
            pytest.skip(f"{harness.describe()}: this test setup keeps the data in one process")
        yield harness


def test_threads_racing_one_execution(harness: StoreHarness) -> None:
    result = attacks.race_threads(harness, writers=4, wins=5)
    assert result.ok, result


def test_tasks_racing_one_execution(harness: StoreHarness) -> None:
    result = attacks.race_tasks(harness, writers=6, wins=4)
    assert result.ok, result


@pytest.mark.slow
def test_processes_racing_one_execution(shared_harness: StoreHarness) -> None:
    result = attacks.race_processes(shared_harness, writers=3, wins=4)
    assert result.ok, result


@pytest.mark.slow
def test_sigkilled_writer_loses_nothing_and_tears_nothing(shared_harness: StoreHarness) -> None:
    result = attacks.kill_writer(shared_harness, runs=3, seed=7)
    assert result.runs == 3 and result.inputs >= 3
    assert result.ok, result


@pytest.mark.slow
def test_sigkilled_workers_fire_every_timer_once(
    shared_harness: StoreHarness, tmp_path: Path
) -> None:
    result = attacks.kill_workers(
        shared_harness, tmp_path / "work", jobs=15, kills=1, stalls=1, seed=3
    )
    assert result.runs == 2
    assert result.ok, result


def _reliability_script() -> ModuleType:
    """``conformance/reliability.py`` (a script, not a package module), imported by path."""
    path = Path(__file__).resolve().parents[1] / "reliability.py"
    spec = importlib.util.spec_from_file_location("harel_reliability_script", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def test_the_migration_matrix_runs_every_ordered_pair(tmp_path: Path) -> None:
    names = [name for name in ("memory", "sqlite") if name in usable_backend_names()]
    if len(names) < 2:
        pytest.skip("the memory and sqlite backends are needed for a pair")
    script = _reliability_script()
    rows = script.run_migrations(names, tmp_path, 1)
    assert [(row.source, row.destination) for row in rows] == [
        ("memory", "sqlite"),
        ("sqlite", "memory"),
    ]
    assert all(row.ok and row.records > 5 for row in rows), [row.problems for row in rows]
    section = "\n".join(script.render_migrations(rows, 1))
    assert "## Migration matrix" in section and "| memory | sqlite |" in section
    assert section.rstrip().endswith("None.")


def test_lost_replies_never_misreport_a_commit(harness: StoreHarness) -> None:
    if harness.server_address() is None:
        pytest.skip(f"{harness.describe()}: no TCP server to lose replies from")
    result = attacks.lost_replies(harness, trials=6, seed=11)
    assert result.runs == 6
    assert result.ok, result
