"""The conformance kit against every installed backend, found the way a user finds them.

Backends come from :func:`harel.registry.available_backends` (status ``ok``); each one runs
the whole kit through ``harel.conformance.run_conformance(url)`` — i.e. through the
backend's own ``harness_from_url`` — in a fresh interpreter, so the registry, the plugin
and the harness are exercised exactly as ``harel conformance URL`` does.

Where a backend's data goes: the ``local_url`` an embedded backend declares, else the environment
variable ``HAREL_TEST_<NAME>_URL`` (e.g. ``HAREL_TEST_POSTGRES_URL``), which also overrides a
local URL.  A backend this file cannot point anywhere FAILS when ``CI=true`` and is skipped,
with the variable to set, otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

import pytest
from harel.conformance import backend_test_url_or_skip, usable_backend_names
from harel.registry import available_backends

REQUIRED = {"memory", "sqlite", "jsondir"}
"""Backends this repository ships; they must always be installed and usable."""

CAPABILITY_FLAGS = {"persistent", "multi_process", "ordered_listing", "exact_pages"}
RUN_TIMEOUT = 900


def run_kit(url: str, cwd: Path, pytest_args: list[str]) -> subprocess.CompletedProcess[str]:
    """``run_conformance(url, pytest_args)`` in a new interpreter (outside this repo's config)."""
    code = textwrap.dedent(
        """
        import json, sys
        from harel.conformance import run_conformance
        raise SystemExit(run_conformance(sys.argv[1], json.loads(sys.argv[2])))
        """
    )
    return subprocess.run(
        [sys.executable, "-c", code, url, json.dumps(pytest_args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def test_the_first_party_and_example_backends_are_installed_and_usable() -> None:
    rows = {info.name: info for info in available_backends()}
    missing = REQUIRED - set(rows)
    assert not missing, f"not discovered: {sorted(missing)}; discovered: {sorted(rows)}"
    for name in REQUIRED:
        assert rows[name].status == "ok", f"{name}: {rows[name].status}: {rows[name].error}"
        assert rows[name].backend is not None and rows[name].backend.harness, name


@pytest.mark.slow
@pytest.mark.parametrize("backend", usable_backend_names())
def test_conformance_kit_passes(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = backend_test_url_or_skip(backend, tmp_path)
    args = ["-q", "-p", "no:cacheprovider", "-x"]
    if request.config.getoption("harel_strict", default=False):
        args.append("--harel-strict")
    workdir = tmp_path / "run"
    workdir.mkdir()
    result = run_kit(url, workdir, args)
    report = (result.stdout[-6000:] + "\n" + result.stderr[-3000:]).strip()
    assert result.returncode == 0, f"kit failed for {backend} ({url}):\n{report}"
    assert " passed" in result.stdout, report


def test_harel_stores_json_lists_versions_and_capabilities() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "harel.cli", "stores", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert set(rows) >= REQUIRED
    for name in REQUIRED:
        row = rows[name]
        assert row["status"] == "ok", row
        assert row["version"] == version(row["distribution"]), row
        assert set(row["capabilities"]) == CAPABILITY_FLAGS, row
        assert all(isinstance(flag, bool) for flag in row["capabilities"].values()), row
    assert rows["jsondir"]["distribution"] == "harel-example-jsondir"
    assert rows["sqlite"]["distribution"] == "harel-store-sqlite"
    assert rows["memory"]["distribution"] == "harel-core"
    assert rows["jsondir"]["capabilities"] == {flag: True for flag in CAPABILITY_FLAGS}
    assert rows["memory"]["capabilities"]["persistent"] is False
