"""``list_leases`` on MongoDB: the shared lease scenario (claims, renewals, a release, a purge,
refused arguments) on mongomock (or ``HAREL_TEST_MONGO_URL``'s server), sync and async (the
requests themselves are pinned and linted in ``test_plan.py``)."""

from __future__ import annotations

import pytest
from harel_store_mongo.testing import MongomockHarness, MongoServerHarness
from harel_testing.leases import arun_lease_scenario, run_lease_scenario

pytestmark = pytest.mark.anyio

Harness = MongomockHarness | MongoServerHarness


def test_leases_follow_claims_renewals_releases_and_purges(harness: Harness) -> None:
    store = harness.open_sync()
    try:
        run_lease_scenario(store)
    finally:
        store.close()


async def test_the_async_store_lists_the_same_leases(harness: Harness) -> None:
    store = await harness.open_async()
    try:
        await arun_lease_scenario(store)
    finally:
        await store.close()
