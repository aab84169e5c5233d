"""pytest plugin of the conformance kit: options, hypothesis profiles, xfails, reporting.

Opt in with ``-p harel.conformance.plugin`` or ``pytest_plugins = ["harel.conformance.plugin"]``
in the ROOT ``conftest.py``; it is never auto-loaded.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from harel.conformance._rewrite import register_suite_for_rewrite
from harel.conformance.harness import StoreHarness
from harel.conformance.profiles import ENV_VAR, register_profiles
from harel.conformance.urls import SecretURL

register_suite_for_rewrite()
register_profiles()

SMOKE_MARKER = "harel_smoke"
"""Marks the kit's smoke subset (the all-backends and wheel runs select it with ``-m``)."""

TRIO_SCOPES = ("all", "loop")
"""``--harel-trio`` choices: every trio run, or only those where the event loop matters."""

STORE_URL = pytest.StashKey[SecretURL]()
"""Where ``run_conformance`` puts the store URL (never on pytest's command line)."""
_DECLARED = pytest.StashKey[dict[str, str]]()
_KIT_ITEMS = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the kit's command-line options."""
    group = parser.getgroup("harel", "harel conformance kit")
    group.addoption("--harel-strict", action="store_true", help="capability skips fail")
    group.addoption("--harel-store-url", default=None, help="run the kit against this store URL")
    group.addoption(
        "--harel-trio",
        choices=TRIO_SCOPES,
        default="all",
        help="which async kit tests also run under trio: 'all' (default) or 'loop' (the smoke "
        "subset and the concerns where the event loop matters: cancellation, concurrency, "
        "lost replies)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Load the selected hypothesis profile and make sure anyio's plugin drives async tests."""
    if os.environ.get(ENV_VAR):
        settings.load_profile(os.environ[ENV_VAR])
    config.addinivalue_line(
        "markers",
        f"{SMOKE_MARKER}: a handful of kit tests, one per concern (`-m {SMOKE_MARKER}`)",
    )
    config.addinivalue_line(
        "markers", "harel_trio: the kit's async tests run under trio (`-m harel_trio`)"
    )
    config.addinivalue_line(
        "markers", "harel_no_trio: a kit test that runs under asyncio only (too slow for twice)"
    )
    manager = config.pluginmanager
    if not manager.has_plugin("anyio") and not manager.is_blocked("anyio"):
        import anyio.pytest_plugin

        if not manager.is_registered(anyio.pytest_plugin):
            manager.register(anyio.pytest_plugin, "anyio")


def _suite_class(item: pytest.Item) -> type | None:
    from harel.conformance.suite._base import KitBase

    cls = getattr(item, "cls", None)
    return cls if isinstance(cls, type) and issubclass(cls, KitBase) else None


def _check_declared(cls: type, declared: dict[str, str]) -> None:
    for name, reason in declared.items():
        base = name.split("[", 1)[0]
        if not (base.startswith("test") and callable(getattr(cls, base, None))):
            raise pytest.UsageError(
                f"{cls.__name__}.expected_failures names {name!r}, which is not a kit test; "
                "use a test function name such as 'test_fire_at_bit_exact' (optionally with "
                "its [parameters])"
            )
        if not isinstance(reason, str) or not reason.strip():
            raise pytest.UsageError(
                f"{cls.__name__}.expected_failures[{name!r}] needs a reason (a non-empty str)"
            )


RUNS_LAST = ("StatefulTests.",)
"""Kit test classes (qualname prefixes of their tests) that run after every other kit test:
the stateful test is the slowest to fail and to shrink, so a broken store shows its plain
failures first (and ``-x`` stops before it)."""


def _qualname(item: pytest.Item) -> str:
    """The qualified name of the item's test function (``ClassName.test_x``), else ``""``."""
    return str(getattr(getattr(item, "function", None), "__qualname__", ""))


def _runs_last(item: pytest.Item) -> bool:
    return _suite_class(item) is not None and _qualname(item).startswith(RUNS_LAST)


LOOP_CONCERNS = ("CancellationTests.", "ConcurrencyTests.", "LostReplyTests.")
"""Kit test classes (qualname prefixes) whose trio runs ``--harel-trio=loop`` keeps: where
cancellation, racing tasks and half-finished calls differ between event loops."""


def _loop_insensitive_trio_run(item: pytest.Item) -> bool:
    """A trio run ``--harel-trio=loop`` leaves out: not smoke, not a loop-sensitive concern."""
    if _suite_class(item) is None or item.get_closest_marker("harel_trio") is None:
        return False
    if item.get_closest_marker(SMOKE_MARKER) is not None:
        return False
    return not _qualname(item).startswith(LOOP_CONCERNS)


def _deselect_trio_runs(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("harel_trio", default="all") != "loop":
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (dropped if _loop_insensitive_trio_run(item) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Turn declared expected failures into strict xfails and remember them for the summary;
    move the stateful test after the other kit tests (``--lf``/``--ff`` reorder afterwards);
    with ``--harel-trio=loop`` leave out the trio runs of loop-insensitive kit tests."""
    _deselect_trio_runs(config, items)
    declared: dict[str, str] = {}
    kit_items = 0
    checked: set[type] = set()
    for item in items:
        cls = _suite_class(item)
        if cls is None:
            continue
        kit_items += 1
        expected: dict[str, str] = dict(getattr(cls, "expected_failures", {}) or {})
        if cls not in checked:
            _check_declared(cls, expected)
            checked.add(cls)
            for name, reason in expected.items():
                declared[f"{cls.__name__}.{name}"] = reason
        original = getattr(item, "originalname", item.name)
        why = expected.get(item.name, expected.get(original))
        if why is not None:
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"declared: {why}"))
    config.stash[_DECLARED] = declared
    config.stash[_KIT_ITEMS] = kit_items
    items[:] = sorted(items, key=_runs_last)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Count the declared expected failures of every collected kit suite."""
    config = terminalreporter.config
    if not config.stash.get(_KIT_ITEMS, 0):
        return
    declared = config.stash.get(_DECLARED, {})
    line = f"harel conformance: {len(declared)} expected failure(s) declared"
    if declared:
        line += ": " + "; ".join(f"{name} ({reason})" for name, reason in sorted(declared.items()))
    if config.getoption("harel_strict", default=False):
        line += " [strict]"
    terminalreporter.write_sep("-", "harel conformance")
    terminalreporter.write_line(line)


def _store_url(config: pytest.Config) -> SecretURL | None:
    """The URL the run targets: ``run_conformance``'s stash entry, else the option."""
    stashed = config.stash.get(STORE_URL, None)
    if stashed is not None:
        return stashed
    option = config.getoption("harel_store_url", default=None)
    return SecretURL(option) if option else None


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Name the store under test, redacted."""
    url = _store_url(config)
    return [] if url is None else [f"harel store: {url}"]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Scrub the store URL's secrets (and every URL's password) from failure reports."""
    report = yield
    _scrub(item.config, report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """Scrub collection errors the same way."""
    report = yield
    _scrub(collector.config, report)
    return report


def _scrub(config: pytest.Config, report: pytest.TestReport | pytest.CollectReport) -> None:
    url = _store_url(config)
    if url is None or report.passed:
        return
    from harel.store.common.urls import scrub_secrets

    secrets = url.secrets()
    if report.longrepr is not None:
        text = str(report.longrepr)
        scrubbed = scrub_secrets(text, secrets)
        if scrubbed != text:
            report.longrepr = scrubbed
    report.sections = [(name, scrub_secrets(body, secrets)) for name, body in report.sections]


@pytest.fixture
def harel_harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreHarness]:
    """The harness for ``--harel-store-url`` / ``run_conformance`` (a backend's own conftest
    fixture overrides this).  A harness that cannot be built fails the test with a redacted
    one-line message and no traceback (which would show the URL)."""
    url = _store_url(request.config)
    if url is None:
        pytest.fail(
            "no `harel_harness` fixture: define one in your conftest.py (a function-scoped "
            "fixture returning a fresh, empty StoreHarness) or pass --harel-store-url URL",
            pytrace=False,
        )
    from harel.registry import harness_for_url
    from harel.store.common.urls import scrub_secrets

    try:
        harness = harness_for_url(url.reveal(), tmp_path)
    except Exception as exc:
        problem = scrub_secrets(str(exc) or type(exc).__name__, url.secrets())
        pytest.fail(f"cannot build the harness for {url}: {problem}", pytrace=False)
    try:
        yield harness
    finally:
        harness.destroy()
