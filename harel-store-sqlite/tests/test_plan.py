"""The SQLite plan without a store: the SQL family's generators stepped by hand, and the same
description run in every dialect variant over a bare sqlite3 connection (including rqlite's
single-request form, whose batches an in-test driver runs in one transaction)."""

from __future__ import annotations

import sqlite3
from collections.abc import Generator, Iterator
from dataclasses import replace
from typing import Any

import pytest
from harel.model import Event, Execution, Status
from harel.store import TimerOp
from harel.store.common.claims import relay_due
from harel.store.common.commit import committing
from harel.store.common.drive import drive
from harel.store.common.enqueue import prepare_enqueue
from harel.store.common.listing import listing_query
from harel.store.common.sql import (
    RQLITE,
    SCHEMA_VERSION,
    SQLITE,
    UPGRADES,
    Batch,
    Dialect,
    Result,
    SqlPlan,
    Statement,
    render,
)
from harel.store.common.sql.errors import RequestOutcomeUnknown
from harel.store.common.sql.testing import execute
from harel.store.errors import (
    AlreadyProcessed,
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


def statement(request: Statement | Batch) -> Statement:
    """``request``, which must be a single statement (an interactive dialect's request)."""
    assert isinstance(request, Statement), request
    return request


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


def ring(found: int, writes: dict[int, str], marked: bool = False) -> tuple[Any, ...]:
    """A ``found_receipts`` row: the stored version, ``r0..r7`` holding ``writes``, and
    whether the commit's dedupe mark is stored."""
    slots: list[str | None] = [None] * 8
    for version, token in writes.items():
        slots[version % 8] = token
    return (found, *slots, int(marked))


def test_the_cas_writes_the_receipt_of_the_new_version_in_the_same_statement() -> None:
    plan = sqlite_plan(make_options("x.db"))
    for version in (3, 7, 8, 12):
        prepared = prepared_state_only(version)
        narrow = statement(next(plan.commit(prepared, None)))
        slot = (version + 1) % 8
        assert f"updated_at = ?, r{slot} = ? WHERE" in narrow.sql, narrow.sql
        assert prepared.token in narrow.params
    insert = statement(next(plan.commit(prepared_insert(), None)))  # BEGIN, then the insert
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


UNMARKED = (
    " AND NOT EXISTS (SELECT 1 FROM processed_events WHERE execution_id = ? AND event_id = ?)"
)


def prepared_step(version: int, base: str | None = None) -> Any:
    """An update with side writes (an emit and the dedupe mark ``ev``) from ``version``,
    fenced by ``base`` (the receipt of ``version`` this process stored)."""
    exe = Execution(id="e", definition_id="d", version=version)
    with committing(exe, [(None, Event(kind="K"))], "ev") as prepared:
        return prepared._replace(base=base)


def test_the_cas_carries_the_fence_and_the_dedupe_condition() -> None:
    """The conditions are the CAS statement's own, so the happy path sends what it sent
    before: no read ahead of the CAS, no extra statement."""
    plan = sqlite_plan(make_options("x.db"))
    loaded = statement(next(plan.commit(prepared_state_only(3), None)))  # a loaded copy
    assert loaded.sql.endswith("AND parent_id IS ?") and "r3" not in loaded.sql
    kept = prepared_state_only(3)._replace(base="mine")
    fenced = statement(next(plan.commit(kept, None)))
    assert fenced.sql.endswith("AND parent_id IS ? AND r3 = ?") and fenced.params[-1] == "mine"
    assert ", r4 = ? WHERE" in fenced.sql  # the new version's receipt, the old one's fence
    wrapped = prepared_state_only(7)._replace(base="mine")  # version 8's slot is 0: fence r7
    assert statement(next(plan.commit(wrapped, None))).sql.endswith("AND r7 = ?")
    for base, fence in ((None, ""), ("mine", " AND r4 = ?")):
        op = plan.commit(prepared_step(4, base), None)
        assert statement(next(op)).sql == "BEGIN IMMEDIATE"
        narrow = statement(op.send(Result()))
        assert narrow.sql.startswith("UPDATE executions SET outcome")
        assert narrow.sql.endswith(f"AND parent_id IS ?{fence}{UNMARKED}")
        assert narrow.params[-2:] == ("e", "ev")
        full = statement(
            op.send(Result(rowcount=0))
        )  # the summary changed: the full CAS, same conditions
        assert full.sql.startswith("UPDATE executions SET definition_id")
        assert full.sql.endswith(f"AND version = ?{fence}{UNMARKED}")


def test_an_already_processed_commit_writes_nothing_and_raises_already_processed() -> None:
    plan = sqlite_plan(make_options("x.db"))
    prepared = prepared_step(4)
    seen = step(
        plan.commit(prepared, None),
        Result(),  # BEGIN
        Result(rowcount=0),  # the narrow CAS: the mark is stored
        Result(rowcount=0),  # the full CAS too
        Result(),  # COMMIT (of nothing)
        Result(rows=[ring(4, {4: "earlier"}, marked=True)]),  # the version even matches
    )
    assert sql_of(seen[:-1]) == ["BEGIN", "UPDATE", "UPDATE", "COMMIT", "SELECT"]  # no side write
    assert seen[4].params == ("ev", "e")  # the read asks for the mark with the ring
    kind, error = seen[-1]
    assert kind == "raised" and isinstance(error, AlreadyProcessed)
    assert (error.execution_id, error.event_id, error.expected, error.found) == ("e", "ev", 4, 4)
    # a re-send of a stored commit comes first: its own mark is stored, and it succeeds
    resent = step(
        plan.commit(prepared, None),
        Result(),
        Result(rowcount=0),
        Result(rowcount=0),
        Result(),
        Result(rows=[ring(5, {5: prepared.token}, marked=True)]),
    )
    assert resent[-1] == ("returned", None)


def test_a_fenced_commit_that_misses_is_a_conflict_not_already_processed() -> None:
    plan = sqlite_plan(make_options("x.db"))
    seen = step(
        plan.commit(prepared_state_only(4)._replace(base="mine"), None),
        Result(rowcount=0),  # the narrow CAS: r4 holds another commit's token
        Result(rowcount=0),  # the full CAS
        Result(rows=[ring(4, {4: "theirs"})]),
    )
    assert sql_of(seen[:-1]) == ["UPDATE", "UPDATE", "SELECT"]  # autocommit: no BEGIN
    kind, error = seen[-1]
    assert kind == "raised" and type(error) is StoreConflict
    assert (error.expected, error.found) == (4, 4)


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
        self.sent: list[Statement | Batch] = []
        """Every request run, in order (clear it to count one operation's)."""

    def run(self, op: Op) -> Any:
        return drive(op, self._execute)

    def _execute(self, request: Statement | Batch) -> Any:
        self.sent.append(request)
        return execute(self.conn, request)

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


STEP: tuple[Any, ...] = (
    [("a", Event(id="out", kind="K")), (None, Event(id="out2", kind="K"))],
    "ev",
    [TimerOp.schedule("/late", 9.0)],
    [("child", "/", {})],
    {"n": 1},
)
"""A commit's arguments after the execution: every kind of side write, dedupe mark ``ev``."""


def everything(family: Family, execution_id: str) -> list[Any]:
    """What the database holds for ``execution_id`` and the relays (to compare before/after)."""
    run, plan = family.run, family.plan
    return [
        run(plan.footprint(execution_id)),
        run(plan.load(execution_id)),
        run(plan.pending_outbox(None)),
        run(plan.pending_spawns(None)),
        run(plan.due_timers(99.0, None)),
        run(plan.read_trace(execution_id)),
        family.conn.execute("SELECT key, priority, ready_at, owner FROM work").fetchall(),
    ]


def writes(sent: list[Statement | Batch]) -> list[str]:
    """The write statements of ``sent``, as their first two words (the transaction
    statements and reads aside); a single-request dialect's side writes, all guarded by the
    CAS's owner token, are left out (they ride in the batch and match nothing when the CAS
    changed no row)."""
    statements: list[Statement] = []
    for request in sent:
        statements += request.statements if isinstance(request, Batch) else [request]
    verbs = ("INSERT", "UPDATE", "DELETE")
    return [
        " ".join(s.sql.split()[:2])
        for s in statements
        if s.sql.startswith(verbs) and "AND commit_token = " not in s.sql
    ]


def refusal(family: Family, exe: Execution, args: tuple[Any, ...]) -> tuple[Any, list[Any]]:
    """Commit ``exe`` with ``args``, expecting a refusal: the error and the requests sent."""
    family.sent.clear()
    with pytest.raises(StoreConflict) as caught:
        family.commit(exe, *args)
    return caught.value, list(family.sent)


def test_refused_commits_write_nothing_in_the_happy_paths_requests(family: Family) -> None:
    """An already-recorded event id and a stale fenced copy are refused by the CAS statement
    the happy path sends anyway: no read before it, no write but the CAS that changed no row
    (a single-request dialect: the happy path's one batch, its found read inside)."""
    commit, run, plan = family.commit, family.run, family.plan
    exe = Execution(id="a", definition_id="d", context={"n": 1})
    commit(exe, [], "ev")
    happy = Execution(id="h", definition_id="d")
    commit(happy, [])
    family.sent.clear()
    commit(happy, *STEP)  # the happy path of the same shape, from a kept copy
    happy_sent = list(family.sent)
    before = everything(family, "a")
    exe.context["n"] = 2
    error, sent = refusal(family, exe, STEP)
    assert isinstance(error, AlreadyProcessed)
    assert (error.event_id, error.found, exe.version) == ("ev", 1, 1)
    assert everything(family, "a") == before
    assert set(writes(sent)) == {"UPDATE executions"}  # the CAS forms only
    if plan.dialect.batch_reads:  # one batch, as on the happy path, led by the same CAS text
        assert len(sent) == len(happy_sent) == 1
        assert isinstance(sent[0], Batch) and isinstance(happy_sent[0], Batch)
        assert sent[0].statements[0].sql == happy_sent[0].statements[0].sql
    else:  # BEGIN, then the narrow CAS the happy path applied, as its second statement
        assert sent[0] == Statement("BEGIN IMMEDIATE") == happy_sent[0]
        assert statement(sent[1]).sql == statement(happy_sent[1]).sql

    # the fence: a stored copy against a purged and re-created execution at its version
    old = Execution(id="f", definition_id="d", context={"who": "old"})
    commit(old, [])
    commit(old, [])
    assert run(plan.purge("f", True)) is True
    new = Execution(id="f", definition_id="d", context={"who": "new"})
    commit(new, [])
    commit(new, [])
    before = everything(family, "f")
    old.context["who"] = "stale"
    refused: list[list[Any]] = []
    for args in ((), STEP):  # state-only (the hot path) and with every side write
        error, sent = refusal(family, old, args)
        assert type(error) is StoreConflict
        assert (error.expected, error.found, old.version) == (2, 2, 2)
        assert everything(family, "f") == before
        assert set(writes(sent)) == {"UPDATE executions"}
        if plan.dialect.batch_reads:
            assert len(sent) == 1 and isinstance(sent[0], Batch)
        refused.append(sent)
    family.sent.clear()
    commit(new, [])  # the live copy goes on: the same CAS text, applied
    assert new.version == 3 and len(family.sent) == 1
    happy_cas = family.sent[0]
    cas = refused[0][0]
    if isinstance(happy_cas, Batch) and isinstance(cas, Batch):
        happy_cas, cas = happy_cas.statements[0], cas.statements[0]
    assert isinstance(cas, Statement) and isinstance(happy_cas, Statement)
    assert cas.sql == happy_cas.sql


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


# -- the state-only hot path: the document-only CAS and the driver's hand-off --------------------


def kept_copy(version: int) -> Any:
    """A state-only update of a copy this process stored, its summary the stored one."""
    return prepared_state_only(version)._replace(base="mine", summary_stored=True)


def test_a_kept_copy_sets_and_checks_only_the_document_version_and_fence() -> None:
    plan = sqlite_plan(make_options("x.db"))
    prepared = kept_copy(3)
    cas = statement(next(plan.commit(prepared, None)))
    assigned, conditions = cas.sql.split(" WHERE ")
    assert assigned == "UPDATE executions SET version = ?, data = ?, updated_at = ?, r4 = ?"
    assert conditions == "id = ? AND version = ? AND r3 = ?"
    assert cas.params == (
        4,
        prepared.document,
        prepared.committed_at,
        prepared.token,
        "e",
        3,
        "mine",
    )
    assert plan.state_only_cas(prepared, None) == cas  # the driver's first statement is this
    # without summary_stored (the summary changed, or no fence): the narrow CAS, as before
    narrow = plan.state_only_cas(prepared._replace(summary_stored=False), None)
    assert narrow is not None and narrow.sql.startswith("UPDATE executions SET outcome")
    # not a state-only update: no first statement for the driver to run itself
    assert plan.state_only_cas(prepared_step(3, "mine"), None) is None
    assert plan.state_only_cas(prepared_insert(), None) is None


def test_a_document_only_cas_that_misses_goes_on_to_the_full_cas() -> None:
    plan = sqlite_plan(make_options("x.db"))
    seen = step(
        plan.commit(kept_copy(4), None),
        Result(rowcount=0),  # the document-only CAS: the fence no longer holds
        Result(rowcount=0),  # the full CAS (fenced too)
        Result(rows=[ring(4, {4: "theirs"})]),
    )
    assert sql_of(seen[:-1]) == ["UPDATE", "UPDATE", "SELECT"]
    assert statement(seen[1]).sql.startswith("UPDATE executions SET definition_id")
    assert statement(seen[1]).sql.endswith("AND r4 = ?")
    kind, error = seen[-1]
    assert kind == "raised" and type(error) is StoreConflict and error.found == 4


def test_the_outcome_a_driver_ran_is_taken_up_where_the_plan_would_have_yielded_it() -> None:
    plan = sqlite_plan(make_options("x.db"))
    prepared = kept_copy(4)
    # a miss the driver met: the plan goes straight to the full CAS (nothing is sent twice)
    seen = step(plan.commit(prepared, None, Result(rowcount=0)), Result(rowcount=1))
    assert statement(seen[0]).sql.startswith("UPDATE executions SET definition_id")
    assert seen[1:] == [("returned", None)]
    # an error the driver met is the plan's, as if thrown in at the statement
    unknown = plan.commit(prepared, None, RequestOutcomeUnknown("no answer"))
    with pytest.raises(CommitOutcomeUnknown) as raised:
        next(unknown)
    assert (raised.value.expected, raised.value.detail) == (4, "no answer")
    boom = sqlite3.OperationalError("disk I/O error")
    with pytest.raises(sqlite3.OperationalError):
        next(plan.commit(prepared, None, boom))
    with pytest.raises(ValueError, match="trace_max"):  # refused before anything runs
        plan.state_only_cas(prepared, -1)
