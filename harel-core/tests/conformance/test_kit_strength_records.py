"""The records and unknown-field checks of the kit are strong: each fails on its broken store.

Issue 11's bugs, each in a deliberately broken memory store of :mod:`broken_stores`: an import
that renumbers the trace, reverses the relays, writes relays before its existence check or
overwrites a stored execution; an export without clock values; an encoder that drops the
fields a newer release added.  Each runs the two concerns (``RecordTests``,
``UnknownFieldTests``) in a nested pytest session — they are what these bugs can reach — and
asserts that the targeted tests fail and no other test of theirs does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent

CONFTEST = """
from broken_stores import harness_fixture

harel_harness = harness_fixture({name!r})
"""

SUITE = """
from harel.conformance import RecordTests, UnknownFieldTests

class TestRecords(RecordTests, UnknownFieldTests):
    pass
"""

IMPORT_KEEPS = "test_import_then_export_keeps_everything"
KEEPS_WORKING = "test_store_keeps_working_after_import"
RING = "test_import_applies_the_ring"
RACE = "test_concurrent_importers_one_wins"
RELAYS_ONLY = "test_relay_only_records_append"
REFUSED = "test_import_over_a_stored_execution_is_refused"

MUST_FAIL: dict[str, set[str]] = {
    "import_renumbers_trace": {IMPORT_KEEPS, KEEPS_WORKING, RING, RACE},
    "import_reverses_relays": {IMPORT_KEEPS, KEEPS_WORKING, RING, RACE, RELAYS_ONLY},
    "import_relays_first": {REFUSED, RACE},
    "import_overwrites": {REFUSED, RACE, RELAYS_ONLY},
    "export_without_times": {"test_export_matches_the_reference", IMPORT_KEEPS, RING, RACE},
    "drops_unknown_fields": {
        "test_unknown_fields_survive_load_modify_commit",
        "test_unknown_fields_survive_import_and_export",
    },
}
"""The kit tests that must catch each bug (in every flavour: sync, async, async under trio)."""

MAY_ALSO_FAIL: dict[str, set[str]] = {}
"""Other tests of the two concerns that meet the same bug."""


NESTED_ARGS = ("-p", "harel.conformance.plugin", "-p", "no:cacheprovider", "--harel-strict")


def run_records(pytester: pytest.Pytester, name: str) -> dict[str, str]:
    """Run the two concerns, strict, against the store ``name``: each item's outcome
    (``passed``, ``failed`` or ``skipped``) by item name (``test_x[sync]``)."""
    pytester.syspathinsert(HERE)
    pytester.makeconftest(CONFTEST.format(name=name))
    pytester.makepyfile(test_kit=SUITE)
    outcomes: dict[str, str] = {}
    for report in pytester.inline_run(*NESTED_ARGS).getreports("pytest_runtest_logreport"):
        item = report.nodeid.split("::")[-1]
        if report.outcome != "passed":  # a failed setup, call or teardown fails the item
            outcomes[item] = report.outcome
        elif report.when == "call":
            outcomes.setdefault(item, "passed")
    return outcomes


def _having(outcomes: dict[str, str], outcome: str) -> set[str]:
    return {item for item, found in outcomes.items() if found == outcome}


FLAVOURS = ("sync", "async", "async-trio")
"""The kit's flavour ids: the async store runs under asyncio and under trio."""


def _flavoured(tests: set[str]) -> set[str]:
    return {f"{test}[{flavour}]" for test in tests for flavour in FLAVOURS}


@pytest.mark.parametrize("bug", sorted(MUST_FAIL))
def test_record_checks_catch_the_bug(pytester: pytest.Pytester, bug: str) -> None:
    outcomes = run_records(pytester, bug)
    failed, passed = _having(outcomes, "failed"), _having(outcomes, "passed")
    must = _flavoured(MUST_FAIL[bug])
    assert must <= failed, f"the kit missed {bug}: failed only {sorted(failed)}"
    assert failed <= must | _flavoured(MAY_ALSO_FAIL.get(bug, set())), sorted(failed)
    assert passed


def test_record_checks_pass_on_the_correct_store(pytester: pytest.Pytester) -> None:
    """(The whole kit on the correct store runs in test_kit_strength.py.)"""
    outcomes = run_records(pytester, "correct")
    passed = _having(outcomes, "passed")
    assert set(outcomes.values()) == {"passed"}, outcomes
    assert _flavoured(set().union(*MUST_FAIL.values())) <= passed
