"""Claims on the SQL family, against the reference: random operations run on the memory store
and on the SQL plan in every dialect variant (SQLite's, an engine without ``ON CONFLICT``, and
rqlite's single-request batches run by a stdlib connection) must give the same claims, the same
renewals and the same ``LeaseLost`` refusals.  Plus: which indexes a claim's statements use.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from typing import Any

import pytest
from harel.conformance.suite.claims import claim_content
from harel.model import Event, Execution
from harel.store import TimerOp
from harel.store.common.drive import drive
from harel.store.common.sql import RQLITE, SQLITE, Dialect, Result, SqlContract, SqlOp, SqlPlan
from harel.store.common.sql.requests import Statement
from harel.store.common.sql.testing import execute
from harel.store.contract import Claim
from harel.store.errors import LeaseLost
from harel.store.memory import DictStore
from harel_store_sqlite import SqliteStore

VARIANTS: dict[str, Dialect] = {
    "sqlite": SQLITE,
    "or-replace": replace(SQLITE, name="old engine", upsert="or_replace"),
    "rqlite": RQLITE,
}


class FamilyStore(SqlContract):
    """The contract over one dialect's plan and an in-memory stdlib database."""

    def __init__(self, dialect: Dialect) -> None:
        self.conn = sqlite3.connect(":memory:", isolation_level=None)
        self._plan = SqlPlan(dialect, where="test database")
        self.trace_max = None
        self._run(self._plan.open_schema(0.0))

    def _run(self, operation: SqlOp[Any]) -> Any:
        return drive(operation, partial(execute, self.conn))

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(params=sorted(VARIANTS))
def family(request: pytest.FixtureRequest) -> Iterator[FamilyStore]:
    store = FamilyStore(VARIANTS[request.param])
    yield store
    store.close()


def shown(claims: list[Claim]) -> list[tuple[Any, ...]]:
    """Claims without seqs (see :func:`harel.conformance.suite.claims.claim_content`)."""
    return claim_content(claims)


def outcome(store: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    try:
        value = getattr(store, name)(*args, **kwargs)
    except LeaseLost as lost:
        return ("LeaseLost", lost.execution_id, str(lost))
    return shown(value) if name == "claim" else value


IDS = ("a", "b", "c", "d")


@pytest.mark.parametrize("seed", range(4))
def test_random_operations_claim_what_the_memory_store_claims(
    family: FamilyStore, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]  # commits date relay work with time.time(): the same clock for both
    monkeypatch.setattr(time, "time", lambda: clock[0])
    rng = random.Random(seed)
    memory = DictStore()
    stores: tuple[Any, Any] = (memory, family)
    exes = [{i: Execution(id=i, definition_id="d") for i in IDS} for _ in stores]
    now = 0.0
    held: list[tuple[str, str | None]] = []
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    for step in range(70):
        clock[0] += 0.25
        now += rng.choice((0.0, 1.0, 7.0, 30.0))
        action = rng.random()
        if action < 0.45:
            key = rng.choice(IDS)
            priority = rng.randrange(5)
            emits = [(rng.choice((*IDS, None)), f"ev{step}.{n}") for n in range(rng.randrange(3))]
            timers = [
                TimerOp.schedule(f"/t{rng.randrange(3)}", now + rng.choice((-5.0, 0.0, 20.0)))
                if rng.random() < 0.7
                else TimerOp.cancel(f"/t{rng.randrange(3)}")
                for _ in range(rng.randrange(3))
            ]
            spawns = [(f"kid{step}.{n}", "/r", {"n": n}) for n in range(rng.randrange(2))]
            for store, mine in zip(stores, exes, strict=True):
                exe = mine[key]
                exe.priority = priority
                store.commit(
                    exe,
                    [(target, Event(id=name, kind="K")) for target, name in emits],
                    None,
                    timers,
                    spawns,
                )
            continue
        if action < 0.75:
            name, args = "claim", (rng.choice(("w1", "w2")), now)
            kwargs = {"lease": rng.choice((5.0, 40.0)), "limit": rng.randrange(1, 7)}
        else:  # mostly a group just claimed, by its holder
            owner, key_or_none = rng.choice(held) if held and rng.random() < 0.7 else ("w1", "a")
            if action < 0.85:
                name, args, kwargs = "renew", (owner, key_or_none, now), {"lease": 10.0}
            else:
                retry = rng.choice((None, now + 15.0))
                name, args, kwargs = "release", (owner, key_or_none), {"retry_at": retry}
        expected = outcome(memory, name, *args, **kwargs)
        if name == "claim" and expected:
            held = [(shown[1], shown[0]) for shown in expected]
        assert outcome(family, name, *args, **kwargs) == expected, (step, name, args, kwargs)
        for limit in (1, 100):  # the leases the two hold agree too, cut or whole
            leases = memory.list_leases(now, limit=limit)
            assert family.list_leases(now, limit=limit) == leases, (step, limit)
    final = now + 1e6
    assert outcome(family, "claim", "end", final, limit=1000) == outcome(
        memory, "claim", "end", final, limit=1000
    )


def test_a_claim_reads_through_indexes(store: SqliteStore) -> None:
    operation = store._plan.claim("w", 100.0, 30.0, 10)
    probe = next(operation)
    assert isinstance(probe, Statement)
    statements = [probe, operation.send(Result(rows=[(1,)]))]  # the probe found a row: BEGIN
    statements += [operation.send(Result()), operation.send(Result())]  # the units, the lease
    operation.close()
    assert all(isinstance(statement, Statement) for statement in statements)
    conn = store._conn
    assert conn is not None
    for statement in (statements[0], statements[2], statements[3]):
        assert isinstance(statement, Statement)
        rows = conn.execute("EXPLAIN QUERY PLAN " + statement.sql, statement.params).fetchall()
        details = [str(row[3]) for row in rows]
        assert any("work_ready" in detail for detail in details), details
        for table in ("work", "outbox", "spawns", "timers"):
            for detail in details:
                # a walk of a whole table (no index, or no bound on the index) is not bounded
                assert not (detail.startswith(f"SCAN {table}") and "INDEX" not in detail), details
                assert detail != "SCAN x USING INDEX outbox_untargeted", details
