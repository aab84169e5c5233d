"""The kit's normal-form and cursor checks (issue 17 §6) are strong: each fails on its bug.

Each broken store of :mod:`broken_forms` runs the two concerns (``NormalFormTests``,
``ListingTests``) in a nested pytest session; the targeted tests must fail, in every flavour
(sync, async under asyncio, async under trio), and no other test of those concerns may.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent

CONFTEST = """
from broken_forms import forms_harness_fixture

harel_harness = forms_harness_fixture({name!r})
"""

SUITE = """
from harel.conformance.suite import ListingTests, NormalFormTests

class TestForms(NormalFormTests, ListingTests):
    pass
"""

IDS = "test_ids_differing_in_normal_form_are_distinct"
REFS = "test_event_ids_timer_paths_and_targets_keep_their_code_points"
PAYLOADS = "test_payload_keys_and_values_keep_their_code_points"
CURSOR = "test_next_page_after_the_cursor_row_is_removed"
CURSOR_CASES = ("purged-all", "purged-done", "left-done", "left-done-or-failed-roots")
FLAVOURS = ("sync", "async", "async-trio")
"""The kit's flavour ids: the async store runs under asyncio and under trio."""

MUST_FAIL: dict[str, set[str]] = {
    "normalised_ids": {f"{IDS}[{flavour}]" for flavour in FLAVOURS},
    "normalised_payloads": {f"{PAYLOADS}[{flavour}]" for flavour in FLAVOURS},
    "lost_cursor_row": {
        f"{CURSOR}[{flavour}-{case}]" for flavour in FLAVOURS for case in CURSOR_CASES
    },
}
"""The kit items that must catch each bug."""

NESTED_ARGS = ("-p", "harel.conformance.plugin", "-p", "no:cacheprovider", "--harel-strict")


def run_forms(pytester: pytest.Pytester, name: str) -> dict[str, str]:
    """Each item's outcome (``passed``, ``failed`` or ``skipped``) by item name."""
    pytester.syspathinsert(HERE)
    pytester.makeconftest(CONFTEST.format(name=name))
    pytester.makepyfile(test_kit=SUITE)
    outcomes: dict[str, str] = {}
    for report in pytester.inline_run(*NESTED_ARGS).getreports("pytest_runtest_logreport"):
        item = report.nodeid.split("::")[-1]
        if report.outcome != "passed":
            outcomes[item] = report.outcome
        elif report.when == "call":
            outcomes.setdefault(item, "passed")
    return outcomes


def _having(outcomes: dict[str, str], outcome: str) -> set[str]:
    return {item for item, found in outcomes.items() if found == outcome}


@pytest.mark.parametrize("bug", sorted(MUST_FAIL))
def test_new_checks_catch_the_bug(pytester: pytest.Pytester, bug: str) -> None:
    outcomes = run_forms(pytester, bug)
    failed = _having(outcomes, "failed")
    assert MUST_FAIL[bug] <= failed, f"the kit missed {bug}: failed only {sorted(failed)}"
    assert failed <= MUST_FAIL[bug], f"{bug} also failed {sorted(failed - MUST_FAIL[bug])}"
    assert _having(outcomes, "passed")


def test_new_checks_pass_on_the_correct_store(pytester: pytest.Pytester) -> None:
    outcomes = run_forms(pytester, "correct")
    assert set(outcomes.values()) == {"passed"}, outcomes
    assert set().union(*MUST_FAIL.values()) <= _having(outcomes, "passed")
