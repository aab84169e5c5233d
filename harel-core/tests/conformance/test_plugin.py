"""The kit's plugin: declared expected failures, capability gates, strict mode, URL runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from harel.conformance import run_conformance
from harel.conformance.run import url_suite_path

HERE = Path(__file__).parent

CONFTEST = """
import pytest
from broken_stores import BrokenHarness

@pytest.fixture
def harel_harness():
    harness = BrokenHarness.named({name!r})
    yield harness
    harness.destroy()
"""

SUITE = """
from typing import ClassVar

from harel.conformance import {base}

class TestKit({base}):
    expected_failures: ClassVar[dict[str, str]] = {expected_failures!r}
"""


def _session(
    pytester: pytest.Pytester,
    name: str | None,
    *args: str,
    expected_failures: dict[str, str] | None = None,
    base: str = "ConformanceSuite",
) -> pytest.RunResult:
    pytester.syspathinsert(HERE)
    if name is not None:
        pytester.makeconftest(CONFTEST.format(name=name))
    pytester.makepyfile(test_kit=SUITE.format(base=base, expected_failures=expected_failures or {}))
    return pytester.runpytest_inprocess(
        "-p", "harel.conformance.plugin", "-p", "no:cacheprovider", "-rs", *args
    )


TIMER_BUGS = {
    "test_delete_timer_guarded_by_fire_at": "deletes regardless of fire_at",
    "test_delete_after_rearm_keeps_the_new_time": "deletes regardless of fire_at",
    "test_fire_at_bit_exact": "deletes regardless of fire_at",
}
RUNS = 3
"""Items per flavoured kit test: ``[sync]``, ``[async]``, ``[async-trio]`` (trio is a dev
dependency, so the kit's trio runs are always collected here)."""


def test_declared_expected_failures_are_strict_xfails_and_counted(
    pytester: pytest.Pytester,
) -> None:
    result = _session(
        pytester,
        "unguarded_delete_timer",
        expected_failures=TIMER_BUGS,
        base="TimerTests",
    )
    # 10 passing flavoured tests and 1 sync-only one; the 3 declared bugs in every flavour
    result.assert_outcomes(passed=10 * RUNS + 1, xfailed=3 * RUNS)
    result.stdout.fnmatch_lines(
        ["harel conformance: 3 expected failure(s) declared: TestKit.test_delete_after_rearm*"]
    )
    assert result.ret == 0


def test_expected_failure_that_passes_fails_the_run(pytester: pytest.Pytester) -> None:
    result = _session(
        pytester,
        "correct",
        base="TimerTests",
        expected_failures={"test_reschedule_replaces[sync]": "thought it was broken"},
    )
    # 13 flavoured tests and 1 sync-only one; the [sync] item declared broken XPASSes
    result.assert_outcomes(passed=13 * RUNS + 1 - 1, failed=1)
    result.stdout.fnmatch_lines(["*XPASS(strict)*thought it was broken*"])


def test_unknown_expected_failure_name_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = _session(
        pytester, "correct", base="TimerTests", expected_failures={"test_no_such": "typo"}
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*expected_failures names 'test_no_such'*"])


def test_undeclared_capabilities_fail(pytester: pytest.Pytester) -> None:
    result = _session(
        pytester, "undeclared", "-k", "capabilities or ordered", base="ConformanceSuite"
    )
    # test_capabilities_declared (sync-only) and test_ordered_by_id fail;
    # test_store_classes_declare_capabilities checks the store classes and passes
    result.assert_outcomes(failed=1 + RUNS, passed=RUNS)
    result.stdout.fnmatch_lines(["*UndeclaredHarness must declare `capabilities*"])


def test_capability_skip_names_the_flag(pytester: pytest.Pytester) -> None:
    result = _session(
        pytester, "unordered", "-k", "ordered_by_id or exact_pages", base="ListingTests"
    )
    result.assert_outcomes(skipped=2 * RUNS)
    result.stdout.fnmatch_lines(
        ["*needs capability 'ordered_listing'*", "*needs capability 'exact_pages'*"]
    )


def test_strict_turns_capability_skips_into_failures(pytester: pytest.Pytester) -> None:
    result = _session(
        pytester,
        "unordered",
        "--harel-strict",
        "-k",
        "ordered_by_id or exact_pages",
        base="ListingTests",
    )
    result.assert_outcomes(failed=2 * RUNS)
    result.stdout.fnmatch_lines(["*--harel-strict: needs capability 'ordered_listing'*"])


def test_unordered_store_passes_the_rest_of_listing(pytester: pytest.Pytester) -> None:
    result = _session(pytester, "unordered", base="ListingTests")
    result.assert_outcomes(passed=30 * RUNS, skipped=2 * RUNS)


def _collected(result: pytest.RunResult) -> set[str]:
    return {line.split("::")[-1] for line in result.outlines if "::" in line}


def test_trio_loop_scope_keeps_only_loop_sensitive_and_smoke_trio_runs(
    pytester: pytest.Pytester,
) -> None:
    every = _collected(_session(pytester, "correct", "--collect-only", "-q"))
    loop = _collected(_session(pytester, "correct", "--collect-only", "-q", "--harel-trio=loop"))
    dropped = every - loop
    assert dropped and all("trio" in name for name in dropped)  # only trio runs go
    kept_trio = {name for name in loop if "trio" in name}
    # a cancellation test and a smoke test keep their trio run; a plain commit test does not
    assert any(
        name.startswith("test_cancelled_commits_follow_the_outcome_rule[trio") for name in kept_trio
    )
    assert "test_purge_removes_everything_it_owns[async-trio]" in kept_trio  # smoke
    assert "test_absent_record_with_version_conflicts[async-trio]" in dropped
    assert {name for name in every if "trio" not in name} <= loop  # sync and asyncio all stay


def test_missing_harness_fixture_explains_itself(pytester: pytest.Pytester) -> None:
    result = _session(pytester, None, "-k", "fresh_dataset", base="ContractTests")
    result.assert_outcomes(errors=RUNS)
    result.stdout.fnmatch_lines(["*no `harel_harness` fixture*--harel-store-url URL*"])


def test_store_url_option_builds_the_harness(pytester: pytest.Pytester) -> None:
    result = _session(
        pytester, None, "--harel-store-url", "memory://", "--harel-strict", base="ContractTests"
    )
    # 12 flavoured tests and 2 sync-only ones
    result.assert_outcomes(passed=12 * RUNS + 2)


def test_url_suite_is_bundled() -> None:
    assert url_suite_path().is_file()
    assert callable(run_conformance)


@pytest.mark.slow
def test_run_conformance_from_another_directory(tmp_path: Path) -> None:
    """``run_conformance`` needs no configuration from the current directory."""
    code = (
        "import sys\n"
        "from harel.conformance import run_conformance\n"
        "sys.exit(run_conformance('memory://', ['-q', '--harel-strict', '-k', "
        "'stale_save or fire_at or fresh_dataset']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{4 * RUNS} passed" in done.stdout
    assert "harel conformance: 0 expected failure(s) declared [strict]" in done.stdout
    assert "warning" not in done.stdout.lower()


@pytest.mark.slow
def test_run_conformance_reports_failures(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from harel.conformance import run_conformance\n"
        "sys.exit(run_conformance('nosuchscheme://x', ['-q', '-k', 'fresh_dataset']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr


PLUGIN_MODULE = """
{imports}
from harel.registry import StoreBackend, hookimpl
from harel.store.memory._spec import CAPABILITIES


@hookimpl
def harel_register_stores(register):
    register(
        StoreBackend(
            name="fake",
            schemes=("fake",),
            store="harel.store.memory.sync:DictStore",
            async_store="harel.store.memory.aio:AsyncDictStore",
            capabilities=CAPABILITIES,
            distribution="fake-dist",
            version="1.0",
        )
    )
"""


@pytest.mark.parametrize(
    ("imports", "loaded"),
    [
        ("", None),
        ("import harel.store.memory.sync", "harel.store.memory.sync"),
        ("import harel.engine", "harel.engine"),
    ],
    ids=["clean", "imports-its-store", "imports-the-engine"],
)
def test_plugin_import_check_names_what_a_plugin_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, imports: str, loaded: str | None
) -> None:
    """The kit's plugin check (run on every registered backend) flags a plugin module that
    imports its store modules or the engine; a clean one passes."""
    from harel.conformance.suite._processes import plugin_problems
    from harel.registry import StoreBackend
    from harel.store.memory._spec import CAPABILITIES

    (tmp_path / "fake_plugin.py").write_text(PLUGIN_MODULE.format(imports=imports))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    backend = StoreBackend(
        name="fake",
        schemes=("fake",),
        store="harel.store.memory.sync:DictStore",
        async_store="harel.store.memory.aio:AsyncDictStore",
        capabilities=CAPABILITIES,
        distribution="fake-dist",
        version="1.0",
    )
    problems = plugin_problems(backend, "fake_plugin")
    if loaded is None:
        assert problems == []
    else:
        (problem,) = problems
        assert f"importing fake_plugin loads ['{loaded}']" in problem
