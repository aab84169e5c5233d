"""``list_leases`` on PostgreSQL: the shared lease scenario (claims, renewals, a release, a
purge, refused arguments) on the real server, sync and async (the statement itself, one
``SELECT`` that locks nothing, is pinned in ``test_plan.py``)."""

from __future__ import annotations

import pytest
from harel_store_postgres import AsyncPostgresStore, PostgresStore
from harel_testing.leases import arun_lease_scenario, run_lease_scenario

pytestmark = pytest.mark.anyio


def test_leases_follow_claims_renewals_releases_and_purges(store: PostgresStore) -> None:
    run_lease_scenario(store)


async def test_the_async_store_lists_the_same_leases(astore: AsyncPostgresStore) -> None:
    await arun_lease_scenario(astore)
