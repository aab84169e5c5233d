"""The SQLite plan without a store: the SQL family's generators stepped by hand, and the same
description run in every dialect variant over a bare sqlite3 connection (including rqlite's
single-request form, whose batches an in-test driver runs in one transaction)."""

from __future__ import annotations

import sqlite3
from collections.abc import Generator, Iterator
from dataclasses import replace
from functools import partial
from typing import Any

import pytest
from harel.model import Event, Execution, Status
from harel.store import TimerOp
from harel.store.common import committing, drive, listing_query, prepare_enqueue, relay_due
from harel.store.common.sql import (
    RQLITE,
    SCHEMA_VERSION,
    SQLITE,
    UPGRADES,
    Dialect,
    Result,
    SqlPlan,
    Statement,
    render,
)
from harel.store.common.sql.errors import RequestOutcomeUnknown
from harel.store.common.sql.testing import execute
from harel.store.errors import (
    CommitOutcomeUnknown,
    ExecutionActive,
    ExecutionNotFound,
    SchemaVersionError,
    StoreConflict,
    StoreUnavailable,
)
from harel_store_sqlite._options import make_options
from harel_store_sqlite._plan import DIALECT, sqlite_plan

Op = Generator[Any, Any, Any]

# -- rendering -----------------------------------------------------------------------------------


def test_qmark_repeats_values_and_numeric_binds_once() -> None:
    text = "SELECT :a FROM t WHERE x = :b AND y = :a"
    qmark = render(text, SQLITE)
    assert qmark.sql == "SELECT ? FROM t WHERE x = ? AND y = ?"
    assert qmark.bind(a=1, b=2).params == (1, 2, 1)
    numeric = render(text, replace(SQLITE, paramstyle="numeric"))
    assert numeric.sql == "SELECT ?1 FROM t WHERE x = ?2 AND y = ?1"
    assert numeric.bind(b=2, a=1, unused=3).params == (1, 2)
    with pytest.raises(KeyError):
        qmark.bind(a=1)


def test_sqlite_dialect_is_interactive_qmark_on_conflict() -> None:
    assert DIALECT is SQLITE
    assert (SQLITE.begin, SQLITE.paramstyle, SQLITE.upsert) == (
        "BEGIN IMMEDIATE",
        "qmark",
        "on_conflict",
    )
    assert not SQLITE.single_request and RQLITE.single_request


def test_values_are_bound_never_spliced() -> None:
    evil = "x' OR '1'='1"
    plan = sqlite_plan(make_options("x.db"))
    listing = plan.list_executions(
        listing_query(
            status=[Status.DONE, Status.FAILED],
            definition_id=evil,
            roots_only=True,
            limit=3,
            cursor=None,
        )
    )
    statement = next(listing)
    assert isinstance(statement, Statement)
    assert evil not in statement.sql and "DONE" not in statement.sql
    assert statement.sql.count("?") == len(statement.params)
    assert evil in statement.params and "DONE" in statement.params


# -- stepping plans by hand ----------------------------------------------------------------------


def step(op: Op, *replies: Any) -> list[Any]:
    """Send ``replies`` one by one (an exception is thrown in); the requests seen, then the
    return value (or the raised exception) as the last item."""
    seen = [next(op)]
    try:
        for reply in replies:
            request = op.throw(reply) if isinstance(reply, BaseException) else op.send(reply)
            seen.append(request)
    except StopIteration as stop:
        seen.append(("returned", stop.value))
    except Exception as exc:
        seen.append(("raised", exc))
    return seen


def sql_of(requests: list[Any]) -> list[str]:
    return [r.sql.split(" ")[0] if isinstance(r, Statement) else repr(r)[:20] for r in requests]


def prepared_insert() -> Any:
    exe = Execution(id="e", definition_id="d")
    with committing(exe, [(None, Event(kind="K"))], "ev") as prepared:
        return prepared


def test_commit_lost_cas_reads_found_and_writes_no_side_rows() -> None:
    plan = sqlite_plan(make_options("x.db"))
    seen = step(
        plan.commit(prepared_insert(), 10),
        Result(rowcount=1),  # BEGIN
        Result(rowcount=0),  # the CAS changed nothing
        Result(rowcount=-1),  # COMMIT (of nothing)
        Result(rows=[(3, *[None] * 8)]),  # found version and receipt ring
    )
    assert sql_of(seen[:-1]) == ["BEGIN", "INSERT", "COMMIT", "SELECT"]
    kind, error = seen[-1]
    assert kind == "raised" and isinstance(error, StoreConflict)
    assert (error.expected, error.found) == (0, 3)


def prepared_state_only(version: int) -> Any:
    exe = Execution(id="e", definition_id="d", version=version)
    with committing(exe, []) as prepared:
        return prepared


def ring(found: int, writes: dict[int, str]) -> tuple[Any, ...]:
    """A ``found_receipts`` row: the stored version and ``r0..r7`` holding ``writes``."""
    slots: list[str | None] = [None] * 8
    for version, token in writes.items():
        slots[version % 8] = token
    return (found, *slots)


def test_the_cas_writes_the_receipt_of_the_new_version_in_the_same_statement() -> None:
    plan = sqlite_plan(make_options("x.db"))
    for version in (3, 7, 8, 12):
        prepared = prepared_state_only(version)
        narrow = next(plan.commit(prepared, None))
        slot = (version + 1) % 8
        assert f"updated_at = ?, r{slot} = ? WHERE" in narrow.sql, narrow.sql
        assert prepared.token in narrow.params
    insert = next(plan.commit(prepared_insert(), None))  # BEGIN, then the insert
    assert insert.sql == "BEGIN IMMEDIATE"


@pytest.mark.parametrize("rivals", [0, 1, 7])
def test_a_missed_cas_whose_receipt_is_its_token_returns_as_stored(rivals: int) -> None:
    plan = sqlite_plan(make_options("x.db"))
    prepared = prepared_state_only(4)
    writes = {5: prepared.token, **{5 + n: f"rival-{n}" for n in range(1, rivals + 1)}}
    seen = step(
        plan.commit(prepared, None),
        Result(rowcount=0),  # the narrow CAS misses
        Result(rowcount=0),  # the full CAS misses
        Result(rows=[ring(5 + rivals, writes)]),
    )
    assert sql_of(seen[:-1]) == ["UPDATE", "UPDATE", "SELECT"]
    assert seen[-1] == ("returned", None)


@pytest.mark.parametrize(
    ("found", "writes"),
    [
        (5, {5: "someone-else"}),  # another writer's commit took the version
        (13, {5: "MINE", 13: "r"}),  # past the window: slot 5 now holds version 13's token
        (4, {}),  # the stored version is below the one it writes
        (7, {}),  # not recorded (written before the upgrade, or imported)
    ],
)
def test_a_missed_cas_without_its_receipt_is_a_conflict(found: int, writes: dict[int, str]) -> None:
    plan = sqlite_plan(make_options("x.db"))
    prepared = prepared_state_only(4)
    writes = {v: prepared.token if t == "MINE" else t for v, t in writes.items()}
    seen = step(
        plan.commit(prepared, None),
        Result(rowcount=0),
        Result(rowcount=0),
        Result(rows=[ring(found, writes)]),
    )
    kind, error = seen[-1]
    assert kind == "raised" and isinstance(error, StoreConflict) and error.found == found


def test_a_write_that_may_have_applied_is_an_unknown_commit_outcome() -> None:
    plan = sqlite_plan(make_options("x.db"))
    prepared = prepared_state_only(2)
    seen = step(plan.commit(prepared, None), RequestOutcomeUnknown("no answer"))
    kind, error = seen[-1]
    assert kind == "raised" and isinstance(error, CommitOutcomeUnknown)
    assert (error.execution_id, error.expected, error.detail) == ("e", 2, "no answer")
    seen = step(
        plan.commit(prepared_insert(), None), Result(), RequestOutcomeUnknown("cut"), Result()
    )
    assert sql_of(seen[:-1]) == ["BEGIN", "INSERT", "ROLLBACK"]  # rolled back, then reported
    assert seen[-1][0] == "raised" and isinstance(seen[-1][1], CommitOutcomeUnknown)


def test_commit_rolls_back_when_a_side_write_fails() -> None:
    plan = sqlite_plan(make_options("x.db"))
    boom = sqlite3.OperationalError("disk I/O error")
    seen = step(
        plan.commit(prepared_insert(), 10),
        Result(),  # BEGIN
        Result(rowcount=1),  # CAS applied
        boom,  # the outbox insert fails
        sqlite3.OperationalError("no transaction"),  # even the ROLLBACK fails: ignored
    )
    assert sql_of(seen[:-1]) == ["BEGIN", "INSERT", "INSERT", "ROLLBACK"]
    assert seen[-1] == ("raised", boom)


def test_enqueue_is_one_transaction_of_the_insert_returning_its_seq_and_the_touch() -> None:
    plan = sqlite_plan(make_options("x.db"))
    prepared = prepare_enqueue("t", Event(id="q", kind="K"), 3)
    seen = step(
        plan.enqueue(prepared), Result(), Result(rows=[(41,)]), Result(rowcount=1), Result()
    )
    assert sql_of(seen[:-1]) == ["BEGIN", "INSERT", "INSERT", "COMMIT"]
    insert, touch = seen[1], seen[2]
    assert insert.sql.startswith("INSERT INTO outbox ") and insert.sql.endswith(" RETURNING seq")
    assert insert.params == ("t", prepared.emit.event_json)  # no owner guard: nothing read
    assert touch.sql.startswith("INSERT INTO work ")
    assert touch.params[:3] == ("t", 3, relay_due(prepared.enqueued_at))
    assert seen[-1] == ("returned", 41)
    boom = sqlite3.OperationalError("disk I/O error")
    failed = step(plan.enqueue(prepared), Result(), Result(rows=[(42,)]), boom, Result())
    assert sql_of(failed[:-1]) == ["BEGIN", "INSERT", "INSERT", "ROLLBACK"]
    assert failed[-1] == ("raised", boom)
    mute = step(plan.enqueue(prepared), Result(), Result(), Result(), Result())
    assert mute[-1][0] == "raised" and isinstance(mute[-1][1], StoreUnavailable)


def test_append_trace_guard_raises_not_found_when_no_row_was_inserted() -> None:
    plan = sqlite_plan(make_options("x.db"))
    seen = step(plan.append_trace("ghost", {"a": 1}, 5), Result(), Result(rowcount=0), Result())
    assert sql_of(seen[:-1]) == ["BEGIN", "INSERT", "COMMIT"]
    assert seen[-1][0] == "raised" and isinstance(seen[-1][1], ExecutionNotFound)


def test_purge_refuses_an_active_execution_and_reports_absence() -> None:
    plan = sqlite_plan(make_options("x.db"))
    deletes = [Result(rowcount=0)] * 7  # the six tables and the work row
    seen = step(plan.purge("e", False), Result(), *deletes, Result(), Result(rows=[("RUNNING",)]))
    assert sql_of(seen[:-1]) == ["BEGIN", *["DELETE"] * 7, "COMMIT", "SELECT"]
    kind, error = seen[-1]
    assert kind == "raised" and isinstance(error, ExecutionActive) and error.status == "RUNNING"
    absent = step(plan.purge("e", True), Result(), *deletes, Result(), Result(rows=[]))
    assert absent[-1] == ("returned", False)
    gone = step(plan.purge("e", True), Result(), *deletes[:6], Result(rowcount=1), Result())
    assert gone[-1] == ("returned", True)


def test_prune_runs_bounded_batches_until_a_short_one() -> None:
    plan = sqlite_plan(make_options("x.db"))
    seen = step(
        plan.prune_processed(100.0, 2), Result(rowcount=2), Result(rowcount=2), Result(rowcount=1)
    )
    assert sql_of(seen[:-1]) == ["DELETE"] * 3  # each its own autocommit write, no BEGIN
    assert seen[-1] == ("returned", 5)
    assert seen[0].params == (100.0, 2)


def test_open_schema_decisions() -> None:
    plan = sqlite_plan(make_options("x.db"))
    ready = step(
        plan.open_schema(1.0),
        Result(rows=[("harel_schema",), ("executions",)]),
        Result(rows=[(1, SCHEMA_VERSION, "harel-store-sqlite 0.1.0")]),
    )
    assert ready[-1] == ("returned", None) and len(ready) == 3
    # a fresh file: BEGIN IMMEDIATE, probe again (another opener may have won), create
    fresh = plan.open_schema(1.0)
    seen = step(fresh, Result(rows=[]), Result(), Result(rows=[]))
    assert sql_of(seen)[:3] == ["SELECT", "BEGIN", "SELECT"]
    assert seen[-1].sql.startswith("CREATE TABLE IF NOT EXISTS harel_schema")
    # a concurrent opener created it meanwhile: nothing to do but COMMIT
    raced = step(
        plan.open_schema(1.0),
        Result(rows=[]),
        Result(),
        Result(rows=[("harel_schema",), ("executions",)]),
        Result(rows=[(1, SCHEMA_VERSION, "harel-store-sqlite 0.1.0")]),
        Result(),
    )
    assert sql_of(raced[:-1]) == ["SELECT", "BEGIN", "SELECT", "SELECT", "COMMIT"]
    newer = step(
        plan.open_schema(1.0),
        Result(rows=[("harel_schema",)]),
        Result(rows=[(1, 99, "harel-store-sqlite 9.0")]),
    )
    assert newer[-1][0] == "raised" and isinstance(newer[-1][1], SchemaVersionError)
    assert "pip install 'harel-store-sqlite>=9.0'" in str(newer[-1][1])
    # a version-2 file (no written_by column): one upgrade transaction recording the release
    old = step(
        plan.open_schema(1.0),
        Result(rows=[("harel_schema",), ("executions",)]),
        Result(rows=[(1, 2)]),
        Result(),
        Result(rows=[("harel_schema",), ("executions",)]),
        Result(rows=[(1, 2)]),
        *[Result()] * len(UPGRADES[2]),
    )
    assert sql_of(old[:4]) == ["SELECT", "SELECT", "BEGIN", "SELECT"]
    assert old[5].sql.startswith("ALTER TABLE harel_schema ADD COLUMN written_by")
    assert old[-1].sql == "COMMIT"
    assert old[-2].params[0].startswith("harel-store-sqlite")


# -- the whole description, in every dialect variant, over sqlite3 -------------------------------


VARIANTS = {
    "sqlite": SQLITE,
    "numeric": replace(SQLITE, name="numbered", paramstyle="numeric"),
    "or-replace": replace(SQLITE, name="old engine", upsert="or_replace"),
    "rqlite": RQLITE,
    "rqlite-numeric": replace(RQLITE, paramstyle="numeric", upsert="or_replace"),
}


class Family:
    """One dialect's plan over a fresh in-memory database."""

    def __init__(self, dialect: Dialect) -> None:
        self.conn = sqlite3.connect(":memory:", isolation_level=None)
        self.plan = SqlPlan(dialect, where="test database")

    def run(self, op: Op) -> Any:
        return drive(op, partial(execute, self.conn))

    def commit(self, exe: Execution, *args: Any, trace_max: int = 2) -> None:
        with committing(exe, *args) as prepared:
            self.run(self.plan.commit(prepared, trace_max))


@pytest.fixture(params=sorted(VARIANTS))
def family(request: pytest.FixtureRequest) -> Iterator[Family]:
    db = Family(VARIANTS[request.param])
    db.run(db.plan.open_schema(0.0))
    db.run(db.plan.open_schema(0.0))  # idempotent
    yield db
    db.conn.close()


def test_every_dialect_runs_the_same_operations(family: Family) -> None:
    run, plan, commit = family.run, family.plan, family.commit
    exe = Execution(id="a", definition_id="d", context={"n": 1})
    for n in range(3):
        commit(
            exe,
            [("a", Event(id=f"out{n}", kind="K"))],
            f"in{n}",
            [TimerOp.schedule("/t", 5.0 + n), TimerOp.schedule("/u", 1.0)],
            [(f"child{n}", "/", {"n": n})],
            {"n": n},
        )
    assert exe.version == 3
    assert run(plan.load("a")) == exe
    assert run(plan.load_for_event("a", "in1")) == (exe, True)
    assert [s["n"] for s in run(plan.read_trace("a"))] == [1, 2]  # ring of 2
    assert run(plan.due_timers(10.0, None)) == [("a", "/u", 1.0), ("a", "/t", 7.0)]
    assert [e.event.id for e in run(plan.pending_outbox(None))] == ["out0", "out1", "out2"]

    # a loser with byte-identical effects writes nothing at all
    stale = Execution(id="a", definition_id="d", context={"n": 1}, version=2)
    with pytest.raises(StoreConflict) as lost:
        commit(
            stale,
            [("a", Event(id="loser", kind="K"))],
            "loser-in",
            [TimerOp.cancel("/u")],
            [("lc", "/", {})],
            {"n": 9},
        )
    assert (lost.value.expected, lost.value.found, stale.version) == (2, 3, 2)
    assert not run(plan.is_processed("a", "loser-in"))
    assert len(run(plan.pending_outbox(None))) == 3 and len(run(plan.pending_spawns(None))) == 3
    assert len(run(plan.due_timers(10.0, None))) == 2 and len(run(plan.read_trace("a"))) == 2

    run(plan.append_trace("a", {"n": 10}, 2))
    assert [s["index"] for s in run(plan.read_trace("a"))] == [2, 3]
    with pytest.raises(ExecutionNotFound):
        run(plan.append_trace("ghost", {}, 2))
    assert run(plan.read_trace("ghost")) == []

    query = listing_query(status=None, definition_id="d", roots_only=True, limit=5, cursor=None)
    page = run(plan.list_executions(query))
    assert [s.id for s in page.items] == ["a"] and page.items[0].updated_at is not None

    with pytest.raises(ExecutionActive):
        run(plan.purge("a", False))
    assert run(plan.footprint("a")) == [
        "execution",
        *(f"processed:in{n}" for n in range(3)),
        "timer:/t",
        "timer:/u",
        *(f"outbox:{n}" for n in (1, 2, 3)),
        *(f"spawn:{n}" for n in (1, 2, 3)),
        "trace:2",
        "trace:3",
    ]
    assert run(plan.prune_processed(0.0, 1)) == 0  # every mark was recorded after epoch 0
    assert run(plan.purge("a", True)) is True
    assert run(plan.footprint("a")) == []
    assert run(plan.purge("a", False)) is False


def test_enqueue_in_every_dialect(family: Family) -> None:
    run, plan, commit = family.run, family.plan, family.commit
    commit(Execution(id="a", definition_id="d", priority=2), [("b", Event(id="e1", kind="K"))])
    first = run(plan.enqueue(prepare_enqueue("b", Event(id="q1", kind="K"), 4)))
    second = run(plan.enqueue(prepare_enqueue("nobody", Event(id="q2", kind="K"), 1)))
    assert (first, second) == (2, 3)
    outbox = run(plan.pending_outbox(None))
    assert [(e.seq, e.target_id, e.event.id) for e in outbox] == [
        (1, "b", "e1"),
        (2, "b", "q1"),
        (3, "nobody", "q2"),
    ]
    assert run(plan.load("nobody")) is None
    claims = run(plan.claim("w", 0.0, 30.0, 10))
    assert {c.execution_id: (c.priority, c.units) for c in claims} == {
        "b": (2, 2),
        "nobody": (1, 1),
    }


def test_prune_in_every_dialect(family: Family) -> None:
    run, plan, commit = family.run, family.plan, family.commit
    exe = Execution(id="p", definition_id="d")
    for n in range(5):
        commit(exe, [], f"ev{n}")
    assert run(plan.prune_processed(0.0, 2)) == 0  # all recorded after epoch 0
    assert run(plan.prune_processed(4e9, 2)) == 5
    assert not run(plan.is_processed("p", "ev0"))


def test_a_newer_schema_is_refused(family: Family) -> None:
    run, plan = family.run, family.plan
    run(iter_one(Statement("UPDATE harel_schema SET version = 99")))
    with pytest.raises(SchemaVersionError, match="version 99"):
        run(plan.open_schema(0.0))


def iter_one(statement: Statement) -> Op:
    return (yield statement)


def test_dialects_are_data() -> None:
    custom = Dialect("custom", paramstyle="numeric", begin="BEGIN", upsert="or_replace")
    plan = SqlPlan(custom, where="x")
    first = next(plan.ack_outbox(3))
    assert first == Statement("DELETE FROM outbox WHERE seq = ?1", (3,))
