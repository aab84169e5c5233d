"""The kit's ``ClaimTests``, ``EnqueueTests`` and ``FenceTests`` are strong: each fails on a
store with the lease (enqueue, dedupe or fence) bug it targets.

Each case runs ``ClaimTests`` alone (not the whole kit) in a nested pytest session against one
broken memory store of :mod:`broken_claims` and asserts which tests fail; the correct store
passes them all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
from harel.conformance.suite import {suite}

class TestClaims({suite}):
    pass
"""

LEASES = {
    "test_a_held_lease_hides_the_group_until_it_expires",
    "test_renew_extends_only_the_holders_unexpired_lease",
    "test_a_commit_to_a_leased_group_waits_for_the_lease",
    "test_a_lease_is_seen_by_another_store_object",
    "test_racing_claimers_get_disjoint_groups",
}

BUGS: dict[str, set[str]] = {
    "lease_ignored": LEASES
    | {"test_limit_spreads_executions_over_claimers", "test_release_not_before_retry_at"},
    "no_priority": {"test_priority_orders_claims_and_aging_bounds_it"},
    "unbounded_claim": {
        "test_limit_bounds_units_and_cuts_a_group_in_order",
        "test_limit_spreads_executions_over_claimers",
        "test_priority_orders_claims_and_aging_bounds_it",
    },
    "release_forgets_retry": {"test_release_not_before_retry_at"},
    "renew_anyone": {
        "test_renew_extends_only_the_holders_unexpired_lease",
        "test_a_held_lease_hides_the_group_until_it_expires",
    },
    "lists_expired_leases": {
        "test_an_expired_lease_is_not_listed_though_nobody_took_it",
        "test_list_leases_orders_by_expiry_and_honours_limit",
    },
    "purge_keeps_work": {
        "test_purge_drops_the_group_and_its_lease",
        "test_purge_drops_a_listed_lease",
    },
    "commit_breaks_lease": {"test_a_commit_to_a_leased_group_waits_for_the_lease"},
    "no_import_touches": {"test_imported_work_is_claimable"},
}
"""The tests that must catch each bug (every flavour)."""

MAY_ALSO_FAIL: dict[str, set[str]] = {
    "lease_ignored": {
        "test_release_makes_what_is_left_claimable",
        "test_purge_drops_the_group_and_its_lease",
        "test_list_leases_changes_nothing",
        "test_list_leases_orders_by_expiry_and_honours_limit",
    },
    "unbounded_claim": {"test_racing_claimers_get_disjoint_groups"},
}


ENQUEUE_BUGS: dict[str, set[str]] = {
    "enqueue_no_touch": {
        "test_enqueued_work_is_due_at_once",
        "test_priority_is_the_new_groups_and_an_existing_group_keeps_its_own",
        "test_purge_drops_enqueued_entries_and_records_carry_them",
    },
    "enqueue_breaks_lease": {"test_a_held_lease_hides_what_is_enqueued"},
    "enqueue_takes_priority": {
        "test_priority_is_the_new_groups_and_an_existing_group_keeps_its_own"
    },
    "enqueue_marks": {"test_enqueue_writes_one_entry_and_nothing_else"},
}
"""The ``EnqueueTests`` that must catch each enqueue bug (every flavour)."""

ENQUEUE_MAY_ALSO_FAIL: dict[str, set[str]] = {
    "enqueue_no_touch": {"test_a_held_lease_hides_what_is_enqueued"},
    "enqueue_breaks_lease": {"test_priority_is_the_new_groups_and_an_existing_group_keeps_its_own"},
}


FENCE_BUGS: dict[str, set[str]] = {
    "remark_accepted": {
        "test_recorded_event_id_is_refused_with_nothing_written",
        "test_recorded_event_id_is_refused_from_a_stale_copy",
    },
    "fence_ignored": {
        "test_stored_copy_cannot_overwrite_a_recreated_execution",
        "test_stored_copy_cannot_overwrite_an_imported_execution",
    },
    "stale_redelivery_conflicts": {"test_recorded_event_id_is_refused_from_a_stale_copy"},
}
"""The ``FenceTests`` that must catch each commit-rule bug (every flavour)."""

SUITES: dict[str, tuple[dict[str, set[str]], dict[str, set[str]], int]] = {
    "ClaimTests": (BUGS, MAY_ALSO_FAIL, 24),
    "EnqueueTests": (ENQUEUE_BUGS, ENQUEUE_MAY_ALSO_FAIL, 18),
    "FenceTests": (FENCE_BUGS, {}, 9),
}
"""Per kit suite: the bugs it must catch, the other tests each bug may fail too, and how many
tests (per flavour, two flavours at least) the correct store passes."""


def _failed(
    pytester: pytest.Pytester, name: str, suite: str = "ClaimTests"
) -> tuple[set[str], int]:
    pytester.syspathinsert(HERE)
    pytester.makeconftest(CONFTEST.format(name=name))
    pytester.makepyfile(test_claims=SUITE.format(suite=suite))
    reprec = pytester.inline_run("-p", "harel.conformance.plugin", "-p", "no:cacheprovider")
    passed, _, failed = reprec.listoutcomes()
    names = {report.nodeid.split("::")[-1].split("[")[0] for report in failed}
    return names, len(passed)


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_correct_store_passes_every_test_of(pytester: pytest.Pytester, suite: str) -> None:
    failed, passed = _failed(pytester, "correct", suite)
    assert failed == set()
    assert passed >= SUITES[suite][2] * 2


@pytest.mark.parametrize(
    ("suite", "bug"),
    [(suite, bug) for suite, (bugs, _, _) in sorted(SUITES.items()) for bug in sorted(bugs)],
)
def test_suite_catches(pytester: pytest.Pytester, suite: str, bug: str) -> None:
    bugs, may_also_fail, _ = SUITES[suite]
    failed, _ = _failed(pytester, bug, suite)
    missing = bugs[bug] - failed
    assert not missing, f"{bug}: these tests did not catch it: {sorted(missing)}"
    extra = failed - bugs[bug] - may_also_fail.get(bug, set())
    assert not extra, f"{bug}: unrelated tests failed too: {sorted(extra)}"
