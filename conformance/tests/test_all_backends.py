"""The conformance kit against every installed backend, found the way a user finds them.

Backends come from :func:`harel.registry.available_backends` (status ``ok``); each one runs
the kit's smoke subset (``-m harel_smoke``: a test or two per concern) through
``harel.conformance.run_conformance(url)`` — i.e. through the backend's own
``harness_from_url`` — in a fresh interpreter, so the registry, the plugin and the harness are
exercised exactly as ``harel conformance URL`` does.  The whole kit runs once per backend, in
that backend's own tests (``make test``); running it here again would only double the time.

Which backends must be there is not a hand-kept list: every workspace member folder
(``harel-core``, ``harel-store-*``, ``conformance/example-store``) that declares a
``harel.stores`` entry point in its ``pyproject.toml`` must be installed and usable.

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
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from harel.conformance import backend_test_url_or_skip, usable_backend_names
from harel.registry import available_backends

REPO = Path(__file__).resolve().parents[2]
SMOKE = ["-m", "harel_smoke"]
"""The kit's smoke subset (the whole kit runs in each backend's own tests)."""


def workspace_backends(repo: Path = REPO) -> dict[str, str]:
    """``{entry-point name: distribution}`` of every workspace member declaring a store plugin.

    The members are the folders matched by the root ``pyproject.toml``'s workspace globs
    (``harel-core``, ``harel-store-*``, ``conformance/example-store``): a new backend joins by
    being a folder.
    """
    root = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    globs: list[str] = root["tool"]["uv"]["workspace"]["members"]
    folders = sorted({folder for pattern in globs for folder in repo.glob(pattern)})
    found: dict[str, str] = {}
    for folder in folders:
        pyproject = folder / "pyproject.toml"
        if not pyproject.is_file():
            continue
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        for name in project.get("entry-points", {}).get("harel.stores", {}):
            found[name] = project["name"]
    return found


REQUIRED = set(workspace_backends())
"""Backends this repository ships (one per member folder's entry point): always usable."""

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


def test_the_workspace_backends_are_installed_and_usable() -> None:
    members = workspace_backends()
    assert {"memory", "sqlite", "jsondir"} <= set(members), members
    rows = {info.name: info for info in available_backends()}
    missing = REQUIRED - set(rows)
    assert not missing, (
        f"not discovered: {sorted(missing)}; discovered: {sorted(rows)} (run `make install`)"
    )
    for name in REQUIRED:
        assert rows[name].status == "ok", f"{name}: {rows[name].status}: {rows[name].error}"
        assert rows[name].distribution == members[name], rows[name]
        assert rows[name].backend is not None and rows[name].backend.harness, name
    assert set(usable_backend_names()) >= REQUIRED


@pytest.mark.slow
@pytest.mark.parametrize("backend", usable_backend_names())
def test_conformance_kit_passes(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = backend_test_url_or_skip(backend, tmp_path)
    args = ["-q", "-p", "no:cacheprovider", "-x", *SMOKE]
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
