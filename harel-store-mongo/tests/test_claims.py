"""Claims on MongoDB beyond the kit: the work rows as stored, and the races the touches around a
commit's single-document write exist for (a claim between a commit's first touch and its write,
a touch between a claim's read and its repair).  The plans are driven step by step over the
harness's own client, so the interleavings are exact (no timing)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest
from harel.model import Event, Execution, Status
from harel.store.common.commit import committing
from harel.store.contract import TimerOp
from harel_store_mongo import MongoStore
from harel_store_mongo._calls import issue
from harel_store_mongo._claims import claim_plan
from harel_store_mongo._errors import translate
from harel_store_mongo._plan import MongoPlan
from harel_store_mongo._requests import Request
from harel_store_mongo._schema import EXECUTIONS, WORK
from harel_store_mongo.testing import MongomockHarness, MongoServerHarness

Harness = MongomockHarness | MongoServerHarness
FAR = 1e18


@pytest.fixture
def store(harness: Harness) -> Iterator[MongoStore]:
    opened = harness.open_sync()
    yield opened
    opened.close()


def rows(harness: Harness) -> dict[str, dict[str, Any]]:
    """The work rows, read directly."""
    return {row["_id"]: row for row in harness.database()[WORK].find()}


def driver(harness: Harness) -> Callable[[Request], Any]:
    database = harness.sync_client().get_database(harness.db)

    def execute(request: Request) -> Any:
        with translate("test"):
            raw = issue(database, request)
            return list(raw) if request.cursor else raw

    return execute


def run_until(
    plan: Generator[Request, Any, Any],
    execute: Callable[[Request], Any],
    stop: Callable[[Request], bool],
) -> Request:
    """Run ``plan`` up to (not including) the first request ``stop`` accepts."""
    request = next(plan)
    while not stop(request):
        request = plan.send(execute(request))
    return request


def finish(
    plan: Generator[Request, Any, Any], execute: Callable[[Request], Any], request: Request
) -> Any:
    """Send ``request`` and everything after it; the plan's value."""
    try:
        while True:
            request = plan.send(execute(request))
    except StopIteration as stop:
        return stop.value


def test_a_commit_writes_the_rows_it_touches(harness: Harness, store: MongoStore) -> None:
    exe = Execution(id="a", definition_id="flow", priority=3)
    store.commit(exe, [("b", Event(id="e", kind="k")), (None, Event(id="u", kind="k"))])
    found = rows(harness)
    assert set(found) == {"b", ""}  # the untargeted group's row is ""
    assert {row["priority"] for row in found.values()} == {3}  # the emitter's, for new rows
    assert {row["owner"] for row in found.values()} == {None}
    store.save(exe)  # state only: no row touched
    assert rows(harness) == found
    exe.status = Status.DONE
    store.save(exe)
    store.purge("b")
    assert set(rows(harness)) == {""}  # purge drops the id's row


def test_a_claim_between_a_commits_touch_and_its_write_loses_nothing(
    harness: Harness, store: MongoStore
) -> None:
    """The claim sees the new row but not yet the outbox entry, so it drops the row as
    early; the commit's second touch writes it back and the entry is claimed next."""
    execute = driver(harness)
    exe = Execution(id="a", definition_id="flow")
    with committing(exe, [("b", Event(id="e", kind="k"))]) as prepared:
        plan = MongoPlan("test").commit(prepared, None)
        write = run_until(plan, execute, lambda r: r.collection == EXECUTIONS)
        assert "b" in rows(harness)  # touched before the write
        assert store.claim("w", FAR) == []  # nothing behind the row yet: repaired (dropped)
        assert "b" not in rows(harness)
        finish(plan, execute, write)
    (claim,) = store.claim("w", FAR)
    assert claim.execution_id == "b" and [e.event.id for e in claim.outbox] == ["e"]


def test_a_repair_loses_to_a_touch_after_the_claims_read(
    harness: Harness, store: MongoStore
) -> None:
    """A claim reads an early row (its timer cancelled) and its units; a commit re-arms the
    timer before the claim's repair lands: the repair matches nothing and the row stays."""
    execute = driver(harness)
    exe = Execution(id="a", definition_id="flow")
    store.commit(exe, [], timers=[TimerOp.schedule("/t", 10.0)])
    store.commit(exe, [], timers=[TimerOp.cancel("/t")])  # the row stays, early
    assert rows(harness)["a"]["ready_at"] == 10.0
    plan = claim_plan("w", 20.0, 30.0, 10)
    repair = run_until(plan, execute, lambda r: r.collection == WORK and r.method == "delete_one")
    store.commit(exe, [], timers=[TimerOp.schedule("/t", 15.0)])
    assert finish(plan, execute, repair) == []
    assert rows(harness)["a"]["ready_at"] == 10.0  # kept (early), not dropped
    (claim,) = store.claim("w", 20.0)
    assert claim.timers == (("/t", 15.0),)


def test_release_re_dates_the_row_and_a_later_claim_drops_it_once_empty(
    harness: Harness, store: MongoStore
) -> None:
    exe = Execution(id="a", definition_id="flow")
    store.commit(exe, [], timers=[TimerOp.schedule("/t", 10.0), TimerOp.schedule("/u", 50.0)])
    (claim,) = store.claim("w", 20.0, lease=5.0)
    assert claim.timers == (("/t", 10.0),)
    assert (rows(harness)["a"]["owner"], rows(harness)["a"]["ready_at"]) == ("w", 25.0)
    store.release("w", "a", retry_at=30.0)  # /t was not handled: it is still armed
    assert (rows(harness)["a"]["owner"], rows(harness)["a"]["ready_at"]) == (None, 30.0)
    store.commit(exe, [], timers=[TimerOp.cancel("/t"), TimerOp.cancel("/u")])  # no touch
    assert rows(harness)["a"]["ready_at"] == 30.0  # early now
    assert store.claim("w", 40.0) == []
    assert "a" not in rows(harness)  # repaired: nothing is left behind it
