"""The kit as a store author's tool (issue 19): readable stable ids, ``--lf``/``--ff``, the
stateful test last, bounded shrinking, caches outside the current directory, every assertion
saying what was expected and found, and the fast loops offered by ``--help``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from harel.cli import main
from harel.conformance import profiles
from harel.conformance._rewrite import SUITE_MODULES
from harel.conformance.suite._base import Snapshot
from harel.conformance.suite.errors import _snapshot_changes

BROKEN_STORE = '''
"""A memory store without a version check on update (the planted bug)."""

from harel.registry import StoreBackend, register
from harel.store.memory._spec import CAPABILITIES
from harel.store.memory.aio import AsyncDictStore
from harel.store.memory.sync import DictStore
from harel.store.memory.testing import MemoryHarness


class BrokenStore(DictStore):
    def commit(self, exe, *args, **kwargs):
        stored = self.load(exe.id) if exe.version else None
        if stored is not None:
            exe.version = stored.version
        super().commit(exe, *args, **kwargs)


class AsyncBrokenStore(AsyncDictStore):
    async def commit(self, exe, *args, **kwargs):
        stored = await self.load(exe.id) if exe.version else None
        if stored is not None:
            exe.version = stored.version
        await super().commit(exe, *args, **kwargs)


class BrokenHarness(MemoryHarness):
    def open_sync(self):
        return BrokenStore(self.data)

    async def open_async(self):
        return AsyncBrokenStore(self.data)


def harness_from_url(url, workdir):
    return BrokenHarness()


def install():
    register(StoreBackend(
        name="brokenmem", schemes=("brokenmem",), store="broken_kit_store:BrokenStore",
        async_store="broken_kit_store:AsyncBrokenStore", capabilities=CAPABILITIES,
        distribution="harel-core", harness="broken_kit_store:harness_from_url",
    ))
'''


def _kit(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``run_conformance(url, args)`` in a fresh interpreter whose cwd is ``tmp_path/cwd``."""
    (tmp_path / "broken_kit_store.py").write_text(BROKEN_STORE)
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    code = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {str(tmp_path)!r})
        import broken_kit_store
        broken_kit_store.install()
        from harel.conformance import run_conformance
        sys.exit(run_conformance(sys.argv[1], json.loads(sys.argv[2])))
        """
    )
    env_cache = {"HAREL_CACHE_DIR": str(tmp_path / "cache"), "HYPOTHESIS_PROFILE": "fast"}
    import os

    return subprocess.run(
        [sys.executable, "-c", code, url, json.dumps(["-p", "no:randomly", *args])],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env_cache},
        check=False,
    )


def test_ids_are_readable_and_the_stateful_test_runs_last(tmp_path: Path) -> None:
    done = _kit(tmp_path, "memory://", "--collect-only", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert ids and all(line.startswith("_url_suite.py::TestStoreConformance::") for line in ids)
    assert not any(".." in line or "harel-conformance-" in line for line in ids)
    assert [line.rpartition("::")[2] for line in ids[-2:]] == [
        "test_random_operations_agree_with_reference[sync]",
        "test_random_operations_agree_with_reference[async]",
    ]
    assert sorted(path.name for path in (tmp_path / "cwd").iterdir()) == []


def test_last_failed_reruns_only_the_failures(tmp_path: Path) -> None:
    first = _kit(tmp_path, "brokenmem://", "-q", "-k", "stale or fresh_dataset")
    assert first.returncode == 1, first.stdout + first.stderr
    failed = [line for line in first.stdout.splitlines() if line.startswith("FAILED ")]
    assert failed and all("_url_suite.py::TestStoreConformance::" in line for line in failed)

    again = _kit(tmp_path, "brokenmem://", "-q", "--lf")
    assert again.returncode == 1, again.stdout + again.stderr
    assert [line for line in again.stdout.splitlines() if line.startswith("FAILED ")] == failed
    summary = again.stdout.splitlines()[-1]
    assert f"{len(failed)} failed" in summary and "deselected" in summary
    assert " passed" not in summary

    ordered = _kit(tmp_path, "brokenmem://", "--ff", "-x", "-k", "fresh_dataset or stale")
    assert ordered.returncode == 1 and "run-last-failure: rerun previous" in ordered.stdout
    assert "1 failed" in ordered.stdout.splitlines()[-1]  # a failure first, then -x stops
    assert sorted(path.name for path in (tmp_path / "cwd").iterdir()) == []


def test_every_suite_module_is_rewritten() -> None:
    for name in ("errors", "resend", "roundtrip", "records", "cancellation", "unknown_fields"):
        assert f"harel.conformance.suite.{name}" in SUITE_MODULES


def test_the_snapshot_comparison_says_what_changed() -> None:
    before = Snapshot({"kit-1": "v1"}, [], [], [], {"kit-1": []}, {})
    after = Snapshot({"kit-1": "v2"}, [], [], [], {"kit-1": []}, {})
    text = _snapshot_changes("commit", before, after)
    assert text.splitlines() == [
        "the refused commit(...) calls changed the store (expected no change):",
        "  executions: expected {'kit-1': 'v1'}",
        "  executions: found    {'kit-1': 'v2'}",
    ]


def test_url_mode_skips_or_bounds_shrinking_and_moves_the_database(tmp_path: Path) -> None:
    from hypothesis import Phase
    from hypothesis.database import DirectoryBasedExampleDatabase
    from hypothesis.internal.conjecture import engine

    default = engine.MAX_SHRINKS
    outside = profiles.kit_settings()
    with profiles.url_mode(tmp_path / "examples"):
        chosen = profiles.kit_settings()
        assert isinstance(chosen.database, DirectoryBasedExampleDatabase)
        assert Path(chosen.database.path) == tmp_path / "examples"
        assert Phase.shrink not in chosen.phases and Phase.generate in chosen.phases
    with profiles.url_mode(None, shrink=True):  # the profile's own phases, shrinks bounded
        assert profiles.kit_settings().phases == outside.phases
        assert engine.MAX_SHRINKS == profiles.URL_MAX_SHRINKS < default
    assert default == engine.MAX_SHRINKS
    restored = profiles.kit_settings()  # what this process had before URL mode, again
    assert restored.database == outside.database
    assert restored.phases == outside.phases


def test_help_offers_the_fast_loops(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "--help"]) == 0
    out = capsys.readouterr().out
    for loop in ("-m harel_smoke", " -x ", " --lf ", " --ff ", "HAREL_CACHE_DIR"):
        assert loop in out, loop
