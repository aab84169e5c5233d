"""The PostgreSQL store's plan, options, error mapping and plugin, without a server."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from typing import Any

import psycopg
import psycopg_pool
import pytest
from harel.model import Event, Execution, Status
from harel.store.common.claims import import_touches, relay_due
from harel.store.common.commit import committing
from harel.store.common.enqueue import prepare_enqueue
from harel.store.common.listing import listing_query
from harel.store.common.records import prepare_import
from harel.store.common.sql.requests import Result, Statement
from harel.store.contract import ExecutionRecord, OutboxEntry, TimerOp
from harel.store.errors import (
    AlreadyProcessed,
    CommitOutcomeUnknown,
    ExecutionActive,
    ExecutionAlreadyExists,
    ExecutionNotFound,
    InvalidPayload,
    InvalidStoreOption,
    InvalidStoreURL,
    PayloadTooLarge,
    SchemaVersionError,
    StoreConfigError,
    StoreConflict,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
)
from harel_store_postgres import _listing, _schema
from harel_store_postgres._conn import Renderer, pool_kwargs
from harel_store_postgres._errors import connect_error, map_error, map_sent_error
from harel_store_postgres._legacy import url_from_env
from harel_store_postgres._options import make_options
from harel_store_postgres._outcome import RequestOutcomeUnknown
from harel_store_postgres._plan import PLAN as plan
from harel_store_postgres._plan import Plan


class Scripted:
    """Drives a plan with scripted results, recording every statement it sends."""

    def __init__(self, *results: Result) -> None:
        self.results = list(results)
        self.sent: list[Statement] = []

    def run(self, operation: Plan[Any]) -> Any:
        try:
            statement = next(operation)
            while True:
                self.sent.append(statement)
                statement = operation.send(self.results.pop(0))
        except StopIteration as done:
            return done.value


def _prepared(exe: Execution, **effects: Any) -> Any:
    with committing(exe, effects.pop("emits", []), **effects) as prepared:
        return prepared


# -- commit -------------------------------------------------------------------------------------


def test_commit_is_one_statement_with_every_effect() -> None:
    exe = Execution(id="a", definition_id="d", status=Status.RUNNING, outcome="o")
    prepared = _prepared(
        exe,
        emits=[("t", Event(id="e", kind="K")), (None, Event(id="f", kind="K"))],
        processed_event_id="in",
        timers=(TimerOp.schedule("/x", 2.5), TimerOp.cancel("/y"), TimerOp.schedule("/z", 3.0)),
        spawns=[("c", "/r", {"k": 1})],
        trace={"event_kind": "Go"},
    )
    driver = Scripted(Result([(True, 1, None, False)], 1))
    driver.run(plan.commit(prepared, 7))
    (statement,) = driver.sent
    assert "harel_commit" in statement.sql
    params = statement.params
    assert params[:8] == ("a", "d", "RUNNING", "o", None, None, prepared.document, 0)
    assert params[9] == "in"
    assert params[10] == ["t", None]
    assert params[12:15] == (["c"], ["/r"], ['{"k":1}'])
    assert params[15:18] == (["/x", "/z"], [2.5, 3.0], ["/y"])
    assert params[19] == 7
    assert params[20:22] == (prepared.token, 2)  # the receipt of version 1: ring slot 1 + 1
    assert len(prepared.token) == 32
    # the work rows it touches, sorted by key ("" = the untargeted group): its own (the
    # earliest timer it arms; its spawns make it due at once), and each emit target's
    at = relay_due(prepared.committed_at)
    assert params[22:26] == (["", "a", "t"], [at, at, at], [0, 0, 0], [False, True, False])
    assert params[26:] == (None, 1)  # no fence (a first commit), version 0's slot


def test_a_commit_without_work_sends_empty_work_arrays() -> None:
    """Marks, trace steps and timer cancels touch no work row: the function's touch loop runs
    no statement (and a state-only commit is the plain CAS ``UPDATE``, no work at all)."""
    exe = Execution(id="a", definition_id="d", version=1)
    prepared = _prepared(exe, processed_event_id="in", timers=(TimerOp.cancel("/y"),))
    driver = Scripted(Result([(True, 2, None, False)], 1))
    driver.run(plan.commit(prepared, None))
    assert driver.sent[0].params[22:26] == ([], [], [], [])
    saved = Scripted(Result([(2,)], 1))
    saved.run(plan.commit(_prepared(Execution(id="a", definition_id="d", version=1)), None))
    (statement,) = saved.sent
    assert statement.sql.startswith("UPDATE {schema}.executions") and "work" not in statement.sql


def test_lost_cas_raises_conflict_with_the_found_version() -> None:
    prepared = _prepared(Execution(id="a", definition_id="d", version=3), trace={"k": 1})
    with pytest.raises(StoreConflict) as info:
        Scripted(Result([(False, 5, None, False)], 1)).run(plan.commit(prepared, None))
    assert (info.value.expected, info.value.found) == (3, 5)
    prepared = _prepared(Execution(id="a", definition_id="d", version=2), trace={"k": 1})
    with pytest.raises(StoreConflict) as info:
        Scripted(Result([(False, None, None, False)], 1)).run(plan.commit(prepared, None))
    assert info.value.found is None


def test_lost_state_only_cas_reads_the_found_version_afterwards() -> None:
    prepared = _prepared(Execution(id="a", definition_id="d", version=3))
    driver = Scripted(Result([], 0), Result([(5, "another-token")], 1))
    with pytest.raises(StoreConflict) as info:
        driver.run(plan.commit(prepared, None))
    assert (info.value.expected, info.value.found) == (3, 5)
    assert len(driver.sent) == 2 and driver.sent[1].params == (5, "a")  # version 4's slot
    with pytest.raises(StoreConflict) as info:
        Scripted(Result([], 0), Result([], 0)).run(plan.commit(prepared, None))
    assert info.value.found is None


def test_bad_trace_max_or_summary_is_refused_before_sending() -> None:
    prepared = _prepared(Execution(id="a", definition_id="d"))
    driver = Scripted()
    with pytest.raises(ValueError):
        driver.run(plan.commit(prepared, -1))
    for bad in (
        Execution(id="a", definition_id="d\x00"),
        Execution(id="a", definition_id="d", outcome="\x00"),
    ):
        with pytest.raises(InvalidPayload):  # by the envelope or by the plan, before sending
            driver.run(plan.commit(_prepared(bad), None))
    assert driver.sent == []


def test_state_only_commit_is_the_plain_cas_update() -> None:
    exe = Execution(id="a", definition_id="d", version=3, status=Status.DONE, outcome="o")
    prepared = _prepared(exe)
    driver = Scripted(Result([(4,)], 1))
    driver.run(plan.commit(prepared, 5))
    (statement,) = driver.sent
    assert "harel_commit" not in statement.sql and statement.sql.startswith("UPDATE")
    assert statement.params[:6] == ("d", "DONE", "o", None, None, 4)
    assert statement.params[7:] == (prepared.document, 5, prepared.token, "a", 3)


def test_first_commit_and_side_writes_go_through_the_function() -> None:
    for exe, effects in (
        (Execution(id="a", definition_id="d"), {}),
        (Execution(id="a", definition_id="d", version=2), {"trace": {"k": 1}}),
        (Execution(id="a", definition_id="d", version=2), {"processed_event_id": "e"}),
        (Execution(id="a", definition_id="d", version=2), {"timers": [TimerOp.cancel("/t")]}),
    ):
        driver = Scripted(Result([(True, exe.version + 1, None, False)], 1))
        driver.run(plan.commit(_prepared(exe, **effects), None))
        assert "harel_commit" in driver.sent[0].sql, effects


# -- enqueue ------------------------------------------------------------------------------------


def test_enqueue_is_one_statement_and_returns_the_seq() -> None:
    """The outbox row, the target's work-row touch (the commit functions' rule, not own: the
    priority is the caller's for a new row only) and the NOTIFY: one statement, no function
    call, every value bound; the target's execution row is not read."""
    prepared = prepare_enqueue("t", Event(id="q", kind="K", data={"n": 1}), 3)
    driver = Scripted(Result([(41, "")], 1))
    assert driver.run(plan.enqueue(prepared)) == 41
    (statement,) = driver.sent
    text = statement.sql
    assert text.startswith("WITH entry AS (INSERT INTO {schema}.outbox")
    assert _schema.touch_work_sql(
        "{schema}.work", "%s::text", "%s::int", "%s::float8", "%s::boolean"
    ) in (text)
    assert "pg_notify(" in text and "harel_" + "commit" not in text
    assert "executions" not in text
    due = relay_due(prepared.enqueued_at)
    assert statement.params == ("t", prepared.emit.event_json, "t", 3, due, False)


def test_the_touch_rule_is_one_text_for_functions_and_enqueue() -> None:
    loop = _schema.touch_work_sql(
        "work", "p_work_keys[i]", "p_work_priority[i]", "p_work_due[i]", "p_work_own[i]"
    )
    assert loop in _schema._created(_schema.UPGRADE_TO_4, "harel_commit")
    assert loop in _schema._created(_schema.UPGRADE_TO_4, "harel_import")
    assert _schema.wake_channel_sql("current_schema()") == _schema.WAKE_CHANNEL_SQL


def test_enqueue_without_a_row_back_is_corruption() -> None:
    prepared = prepare_enqueue("t", Event(id="q", kind="K"), 0)
    with pytest.raises(StoreCorrupted):
        Scripted(Result([], 0)).run(plan.enqueue(prepared))


# -- records ------------------------------------------------------------------------------------


def _export_row(**columns: Any) -> tuple[Any, ...]:
    empty: dict[str, Any] = {"data": None, "updated_at": None}
    names = ("events", "marked", "paths", "fire_at", "oseq", "oevent", "sseq", "child", "root")
    empty.update({name: [] for name in (*names, "context", "idx", "entry")})
    empty.update(columns)
    return tuple(empty.values())


def test_export_is_one_statement_decoded_into_a_record() -> None:
    exe = Execution(id="a", definition_id="d", version=2)
    row = _export_row(
        data=exe.model_dump_json(),
        updated_at=5,
        events=["e1", "e2"],
        marked=[1.5, 2],
        paths=["/t"],
        fire_at=[9.0],
        oseq=[4, 7],
        oevent=['{"id":"x","kind":"K"}', '{"id":"y","kind":"K"}'],
        sseq=[3],
        child=["c"],
        root=["/r"],
        context=['{"k":1}'],
        idx=[5, 6],
        entry=['{"event_kind":"A"}', '{"event_kind":"B"}'],
    )
    driver = Scripted(Result([row], 1))
    record = driver.run(plan.export_execution("a"))
    assert len(driver.sent) == 1 and driver.sent[0].params == ("a",)
    assert record.execution == exe and record.updated_at == 5.0
    assert record.processed == (("e1", 1.5), ("e2", 2.0)) and record.timers == (("/t", 9.0),)
    assert [(o.seq, o.target_id, o.event.id) for o in record.outbox] == [
        (4, "a", "x"),
        (7, "a", "y"),
    ]
    assert [(s.seq, s.parent_id, s.child_id, s.context) for s in record.spawns] == [
        (3, "a", "c", {"k": 1})
    ]
    assert [(t["index"], t["event_kind"]) for t in record.trace] == [(5, "A"), (6, "B")]
    assert Scripted(Result([_export_row()], 1)).run(plan.export_execution("a")) is None
    with pytest.raises(StoreCorrupted, match="spawn 3"):
        Scripted(Result([_export_row(sseq=[3], child=["c"], root=["/r"], context=["[]"])], 1)).run(
            plan.export_execution("a")
        )
    with pytest.raises(ValueError):
        Scripted().run(plan.export_execution("a\x00"))


def test_import_is_one_call_and_a_stored_execution_is_refused() -> None:
    exe = Execution(id="a", definition_id="d", version=3)
    record = ExecutionRecord(
        execution_id="a",
        execution=exe,
        updated_at=2.5,
        processed=(("e", 1.0),),
        timers=(("/t", 4.0),),
        outbox=(OutboxEntry(9, "a", Event(id="x", kind="K")),),
        trace=({"index": 4, "k": 1}, {"index": 5, "k": 2}),
    )
    prepared = prepare_import(record, trace_max=1)
    driver = Scripted(Result([(True,)], 1))
    driver.run(plan.import_execution(prepared))
    (statement,) = driver.sent
    assert "harel_import" in statement.sql
    assert statement.params[:2] == ("a", True) and statement.params[7:9] == (3, 2.5)
    assert statement.params[10:14] == (["e"], [1.0], ["/t"], [4.0])
    assert statement.params[14] == ["a"] and statement.params[19] == [5]  # the ring keeps 1
    # one work row, its own (core's import_touches decides its due time)
    (touched,) = import_touches(prepared)
    assert statement.params[21:] == (["a"], [touched.due], [0], [True])
    with pytest.raises(ExecutionAlreadyExists):
        Scripted(Result([(False,)], 1)).run(plan.import_execution(prepared))
    relays = prepare_import(
        replace(record, execution=None, processed=(), timers=(), trace=()), trace_max=None
    )
    driver = Scripted(Result([(True,)], 1))
    driver.run(plan.import_execution(relays))
    assert driver.sent[0].params[1:3] == (False, None)


# -- reads and writes ---------------------------------------------------------------------------


def test_reads_validate_before_sending() -> None:
    driver = Scripted()
    for operation in (
        lambda: plan.load("a\x00"),
        lambda: plan.is_processed("a", "x" * 2000),
        lambda: plan.read_trace(""),
        lambda: plan.due_timers(float("nan"), None),
        lambda: plan.ack_outbox(-1),
        lambda: plan.pending_outbox(0),
    ):
        with pytest.raises(ValueError):
            driver.run(operation())
    with pytest.raises(TypeError):
        driver.run(plan.delete_timer("a", "/p", None))  # type: ignore[arg-type]
    assert driver.sent == []


def test_load_for_event_decodes() -> None:
    exe = Execution(id="a", definition_id="d", version=4)
    driver = Scripted(Result([(exe.model_dump_json(), True)], 1))
    loaded, seen = driver.run(plan.load_for_event("a", "e"))
    assert loaded == exe and seen is True
    assert Scripted(Result([], 0)).run(plan.load_for_event("a", "e")) == (None, False)


def test_damaged_rows_raise_store_corrupted() -> None:
    with pytest.raises(StoreCorrupted, match="'a'"):
        Scripted(Result([("{not json",)], 1)).run(plan.load("a"))
    with pytest.raises(StoreCorrupted, match="outbox entry 7"):
        Scripted(Result([(7, None, "[]")], 1)).run(plan.pending_outbox(None))


def test_due_timers_are_floats_in_order_given() -> None:
    rows = [("a", "/x", 1.0), ("b", "/y", 2)]
    due = Scripted(Result(rows, 2)).run(plan.due_timers(5, 10))
    assert due == [("a", "/x", 1.0), ("b", "/y", 2.0)]
    assert all(type(at) is float for _, _, at in due)


def test_list_leases_is_one_select_of_held_rows_decoded_in_order() -> None:
    driver = Scripted(Result([("", "w1", 5.0), ("a", "w2", 7)], 2))
    leases = driver.run(plan.list_leases(1.0, 10))
    assert [(lease.execution_id, lease.owner, lease.expires_at) for lease in leases] == [
        (None, "w1", 5.0),
        ("a", "w2", 7.0),
    ]
    (statement,) = driver.sent
    assert statement.sql.startswith("SELECT") and "owner IS NOT NULL" in statement.sql
    assert "FOR UPDATE" not in statement.sql  # read-only: locks nothing
    assert statement.params == ([4, 3, 2, 1, 0], 1.0, 10, 10)


def test_append_trace_unknown_execution() -> None:
    with pytest.raises(ExecutionNotFound):
        Scripted(Result([(False,)], 1)).run(plan.append_trace("a", {"x": 1}, 3))


def test_purge_refusal_and_result() -> None:
    with pytest.raises(ExecutionActive) as info:
        Scripted(Result([(True, False, "RUNNING")], 1)).run(plan.purge("a", False))
    assert info.value.status == "RUNNING"
    assert Scripted(Result([(False, True, None)], 1)).run(plan.purge("a", False)) is False
    driver = Scripted(Result([(True, True, "DONE")], 1))
    assert driver.run(plan.purge("a", True)) is True
    assert driver.sent[0].params[1] is True
    assert sorted(driver.sent[0].params[2]) == ["CANCELLED", "DONE", "FAILED"]
    with pytest.raises(TypeError):
        Scripted().run(plan.purge("a", 1))  # type: ignore[arg-type]


def test_prune_runs_batches_until_one_comes_up_short() -> None:
    driver = Scripted(Result([], 10), Result([], 10), Result([], 3))
    assert driver.run(plan.prune_processed(100.0, 10)) == 23
    assert len(driver.sent) == 3 and driver.sent[0].params == (100.0, 10)
    with pytest.raises(ValueError):
        Scripted().run(plan.prune_processed(100.0, 0))
    with pytest.raises(ValueError):
        Scripted().run(plan.prune_processed(float("inf"), 10))


def test_listing_statements() -> None:
    query = listing_query(
        status=[Status.DONE, Status.FAILED],
        definition_id="d",
        roots_only=True,
        limit=5,
        cursor=None,
    )
    statement = _listing.listing_statement(query)
    assert statement.sql.count("UNION ALL") == 1
    assert statement.params == ("d", "DONE", 6, "d", "FAILED", 6, 6)
    assert "parent_id IS NULL" in statement.sql
    assert (
        Scripted()
        .run(
            plan.list_executions(
                listing_query(status=[], definition_id=None, roots_only=False, limit=5, cursor=None)
            )
        )
        .items
        == []
    )


# -- schema -------------------------------------------------------------------------------------


def _version_row(version: int, written_by: str | None = None) -> Result:
    row: dict[str, Any] = {"singleton": True, "version": version}
    if written_by is not None:
        row["written_by"] = written_by
    return Result([(row,)], 1)


def test_open_schema_ready_costs_two_probes() -> None:
    driver = Scripted(Result([(True,)], 1), _version_row(_schema.SCHEMA_VERSION, "x 1"))
    driver.run(_schema.open_schema("s", "here"))
    assert len(driver.sent) == 2


def test_open_schema_creates_under_the_advisory_lock() -> None:
    nothing = Result([(False,)], 1)
    absent = [nothing, nothing]  # no version table, no foreign executions table
    results = [*absent, Result(), Result(), *absent] + [Result()] * (len(_schema.DDL) + 2)
    # probes (absent), BEGIN, lock, probes again (absent), the DDL, the version row, COMMIT
    driver = Scripted(*results)
    driver.run(_schema.open_schema("s", "here"))
    sqls = [statement.sql for statement in driver.sent]
    assert sqls[1] == _schema.FOREIGN_PROBE
    assert sqls[2] == _schema.BEGIN and "pg_advisory_xact_lock" in sqls[3]
    assert sqls[6 : 6 + len(_schema.DDL)] == list(_schema.DDL)
    assert sqls[-1] == _schema.COMMIT and sqls[-2] == _schema.RECORD_VERSION
    assert driver.sent[-2].params == (_schema.SCHEMA_VERSION, _schema.written_by())


def test_open_schema_refuses_a_foreign_executions_table() -> None:
    driver = Scripted(Result([(False,)], 1), Result([(True,)], 1))
    with pytest.raises(SchemaVersionError, match="no harel_schema version table"):
        driver.run(_schema.open_schema("s", "here"))
    assert len(driver.sent) == 2  # nothing written


def test_open_schema_upgrades_version_1_under_the_lock() -> None:
    old, present = _version_row(1), Result([(True,)], 1)
    steps = _schema.UPGRADES[1]
    driver = Scripted(
        present, old, Result(), Result(), present, old, *[Result()] * (len(steps) + 3)
    )
    driver.run(_schema.open_schema("s", "here", now=1000.0))
    sqls = [statement.sql for statement in driver.sent]
    assert sqls[2:4] == [_schema.BEGIN, _schema.LOCK]
    assert sqls[6 : 6 + len(steps)] == list(steps)
    assert any("harel_import" in text for text in steps)
    assert any("receipts" in text for text in steps)  # version 3's step
    tail = _schema.UPGRADE_TO_4 + _schema.UPGRADE_TO_5
    assert steps[-len(tail) :] == tail  # then version 4's and version 5's
    # the work rows of what the old layout holds, in the same transaction, then the version
    assert sqls[-3:] == [_schema.BACKFILL_TO_4, _schema.RECORD_VERSION, _schema.COMMIT]
    assert driver.sent[-3].params == (relay_due(1000.0),) * 2


def test_version_4_functions_extend_the_older_texts() -> None:
    """harel_commit / harel_import / harel_purge of version 4 are the older texts plus the
    work statements (derived, so they cannot drift apart)."""
    for name, older in (
        ("harel_commit", _schema.UPGRADE_TO_3),
        ("harel_import", _schema.UPGRADE_TO_2),
        ("harel_purge", _schema._FUNCTIONS),
    ):
        text, before = _schema._created(_schema.UPGRADE_TO_4, name), _schema._created(older, name)
        assert "work" in text and "work" not in before, name
    assert _schema.WORK_PARAMS in _schema._created(_schema.UPGRADE_TO_4, "harel_commit")
    with pytest.raises(RuntimeError, match="not unique"):
        _schema._extended("a b a", ("a", "c"))


def test_open_schema_upgrades_version_4_without_the_backfill() -> None:
    """A version-4 schema keeps its work rows: its upgrade replaces harel_commit alone."""
    old, present = _version_row(4), Result([(True,)], 1)
    steps = _schema.UPGRADES[4]
    assert steps == _schema.UPGRADE_TO_5
    driver = Scripted(
        present, old, Result(), Result(), present, old, *[Result()] * (len(steps) + 2)
    )
    driver.run(_schema.open_schema("s", "here", now=1000.0))
    sqls = [statement.sql for statement in driver.sent]
    assert sqls[6:-2] == list(steps) and _schema.BACKFILL_TO_4 not in sqls
    assert sqls[-2:] == [_schema.RECORD_VERSION, _schema.COMMIT]


def test_version_5_commit_checks_the_mark_and_the_fence_in_its_cas() -> None:
    """harel_commit of version 5 is version 4's text plus the dedupe condition in both CAS
    arms, the fence in the UPDATE's WHERE and the mark's presence read after a lost CAS."""
    text = _schema._created(_schema.UPGRADE_TO_5, "harel_commit")
    before = _schema._created(_schema.UPGRADE_TO_4, "harel_commit")
    assert text.count(_schema.UNMARKED_SQL) == 2 and _schema.UNMARKED_SQL not in before
    update = text[text.index("UPDATE executions") : text.index("END IF;")]
    assert _schema.FENCE_SQL in update and _schema.UNMARKED_SQL in update
    lost = text[text.index("IF NOT FOUND THEN") : text.index("RETURN;")]
    assert "o_marked := " + _schema.MARKED_SQL in lost
    assert "p_base text, p_base_slot integer" in text and "OUT o_marked boolean" in text
    assert _schema.WORK_PARAMS in text and "pg_notify(" in text  # version 4's part is kept
    (drop,) = [step for step in _schema.UPGRADE_TO_5 if step.startswith("DROP FUNCTION")]
    assert "harel_commit(" in drop and drop.endswith("integer[], boolean[])")


def test_open_schema_upgraded_meanwhile_writes_nothing() -> None:
    present = Result([(True,)], 1)
    current = _version_row(_schema.SCHEMA_VERSION)
    driver = Scripted(present, _version_row(1), Result(), Result(), present, current, Result())
    driver.run(_schema.open_schema("s", "here"))
    assert [statement.sql for statement in driver.sent][-1] == _schema.COMMIT
    assert _schema.RECORD_VERSION not in [statement.sql for statement in driver.sent]


def test_open_schema_refuses_a_newer_layout_before_writing() -> None:
    newer = _schema.SCHEMA_VERSION + 1
    driver = Scripted(Result([(True,)], 1), _version_row(newer, "harel-store-postgres 9.1"))
    with pytest.raises(SchemaVersionError) as info:
        driver.run(_schema.open_schema("s", "here"))
    message = str(info.value)
    assert f"version {newer}" in message and f"version {_schema.SCHEMA_VERSION}" in message
    assert "pip install 'harel-store-postgres>=9.1'" in message
    assert len(driver.sent) == 2


def test_open_schema_refuses_a_damaged_version_row() -> None:
    driver = Scripted(Result([(True,)], 1), Result([({"version": "two"},)], 1))
    with pytest.raises(StoreCorrupted):
        driver.run(_schema.open_schema("s", "here"))


def test_renderer_quotes_any_schema_name() -> None:
    render = Renderer('we"ird $$ ;')
    assert render("SELECT 1 FROM {schema}.t WHERE x = %s") == (
        b'SELECT 1 FROM "we""ird $$ ;".t WHERE x = %s'
    )


def test_every_template_renders() -> None:
    render = Renderer("s")
    for template in _schema.DDL:
        assert b'"s"' in render(template)


# -- options ------------------------------------------------------------------------------------


def test_url_forms_and_knobs() -> None:
    options = make_options(
        "postgres://u:p%2Fw@db.example:6543/app?schema=tenant_1&pool_max=4&sslmode=require"
        "&pool_timeout=2.5&trace_max=0&reconnect_timeout=0.5",
        pool_min=2,
    )
    assert options.connect == {
        "connect_timeout": "5",
        "host": "db.example",
        "port": "6543",
        "user": "u",
        "password": "p/w",
        "dbname": "app",
        "sslmode": "require",
    }
    assert (options.schema, options.pool_min, options.pool_max) == ("tenant_1", 2, 4)
    assert (options.pool_timeout, options.trace_max, options.reconnect_timeout) == (2.5, 0, 0.5)
    assert "p/w" not in repr(options) and "p%2Fw" not in repr(options)
    assert make_options("postgresql:///test").connect == {
        "connect_timeout": "5",
        "dbname": "test",
    }


def test_outage_waits_are_bounded_by_default() -> None:
    """Issue 17: a call waited 30 s for a pooled connection while the server was down, and
    the pool's reconnect backoff grew past a minute.  The defaults bound both."""
    options = make_options("postgresql://h/db")
    assert (options.pool_timeout, options.reconnect_timeout) == (5.0, 2.0)
    assert options.connect["connect_timeout"] == "5"
    kwargs = pool_kwargs(options)
    assert (kwargs["timeout"], kwargs["reconnect_timeout"]) == (5.0, 2.0)
    with pytest.raises(InvalidStoreURL, match="reconnect_timeout"):
        make_options("postgresql://h/db?reconnect_timeout=-1")


@pytest.mark.parametrize(
    "url",
    [
        "mysql://h/db",
        "postgresql://h/db?bogus=1",
        "postgresql://h/db?schema=",
        "postgresql://h/db?schema=pg_catalog",
        "postgresql://h/db?schema=" + "x" * 64,
        "postgresql://h/db?pool_max=0",
        "postgresql://h/db?pool_min=5&pool_max=2",
        "postgresql://h/db?pool_timeout=soon",
    ],
)
def test_bad_urls(url: str) -> None:
    with pytest.raises(InvalidStoreURL):
        make_options(url)


def test_password_never_in_url_errors() -> None:
    with pytest.raises(InvalidStoreURL) as info:
        make_options("postgresql://user:hunter2@h/db?bogus=1")
    assert "hunter2" not in str(info.value)
    with pytest.raises(InvalidStoreURL):
        make_options("postgresql://h/db", nope=1)


def test_knob_messages_are_the_spec_s_and_hide_the_password() -> None:
    url = "postgresql://user:hunter2@h/db"
    refusals = []
    for knobs in ({"pool_min": 5, "pool_max": 2}, {"pool_mx": 3}, {"schema": "pg_x"}):
        with pytest.raises(InvalidStoreOption) as refused:
            make_options(url, **knobs)
        refusals.append(str(refused.value))
    with pytest.raises(InvalidStoreOption) as in_url:
        make_options(f"{url}?pool_timeout=soon")
    refusals.append(str(in_url.value))
    assert refusals[0] == "option pool_max=2 must be >= pool_min=5"
    assert refusals[1].startswith("unknown option(s) pool_mx for a PostgreSQL store")
    assert "(did you mean pool_max?)" in refusals[1]
    assert refusals[2] == "schema name 'pg_x' is reserved (pg_ prefix); pick another"
    assert refusals[3] == "option pool_timeout='soon' must be a number >= 0"
    assert not any("hunter2" in text for text in refusals)
    with_schema = make_options(url).with_schema("tenant")
    assert with_schema.schema == "tenant"
    with pytest.raises(InvalidStoreOption, match="must be a string"):
        with_schema.with_schema(5)  # type: ignore[arg-type]


def test_legacy_dsn() -> None:
    assert url_from_env({}) is None
    assert url_from_env({"STM_POSTGRES_DSN": "postgresql://a@b/c"}) == "postgresql://a@b/c"
    url = url_from_env(
        {"STM_POSTGRES_DSN": "host=db port=5433 dbname=app user=w password='a b\\'c' sslmode=x"}
    )
    assert url is not None
    options = make_options(url)
    assert options.connect["password"] == "a b'c" and options.connect["port"] == "5433"
    assert options.connect["sslmode"] == "x" and options.connect["host"] == "db"
    socket_url = url_from_env({"STM_POSTGRES_DSN": "host=/run/pg dbname=app"})
    assert socket_url is not None
    assert make_options(socket_url).connect["host"] == "/run/pg"
    with pytest.raises(StoreConfigError, match="STM_POSTGRES_DSN"):
        url_from_env({"STM_POSTGRES_DSN": "host='unterminated"})


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (psycopg.errors.AdminShutdown("bye"), StoreUnavailable),
        (psycopg.errors.SerializationFailure("retry"), StoreUnavailable),
        (psycopg.errors.QueryCanceled("timeout"), StoreUnavailable),
        (psycopg.errors.DiskFull("full"), StoreUnavailable),
        (psycopg.OperationalError("connection lost"), StoreUnavailable),
        (psycopg_pool.PoolTimeout("no connection"), StoreUnavailable),
        (psycopg.errors.ProgramLimitExceeded("index row too big"), PayloadTooLarge),
        (psycopg.errors.UntranslatableCharacter("bad"), InvalidPayload),
        (psycopg.errors.UndefinedTable("gone"), StoreCorrupted),
        (psycopg.errors.UniqueViolation("dup"), StoreError),
        (psycopg_pool.PoolClosed("closed"), StoreError),
    ],
)
def test_error_mapping(error: BaseException, expected: type[StoreError]) -> None:
    mapped = map_error(error, "postgresql://u:***@h/db")
    assert isinstance(mapped, expected)
    assert type(mapped) is not StoreError or expected is StoreError


@pytest.mark.parametrize(
    ("error", "broken", "unknown"),
    [
        (psycopg.OperationalError("server closed the connection unexpectedly"), True, True),
        (psycopg.OperationalError("consuming input failed"), True, True),
        (psycopg.errors.AdminShutdown("terminating connection"), False, True),
        (psycopg.errors.ConnectionFailure("lost"), False, True),
        (psycopg.errors.SerializationFailure("retry"), False, False),
        (psycopg.errors.QueryCanceled("statement timeout"), False, False),
        (psycopg.errors.UniqueViolation("dup"), False, False),
    ],
)
def test_errors_after_sending(error: BaseException, broken: bool, unknown: bool) -> None:
    """A statement whose connection broke (or whose server went away) may have committed:
    RequestOutcomeUnknown.  An error the server answered on a live connection rolled the
    statement back: mapped as before (plain StoreUnavailable = nothing written)."""
    mapped = map_sent_error(error, "postgresql://h/db", broken)
    assert isinstance(mapped, RequestOutcomeUnknown) is unknown
    if unknown:
        assert "may or may not have been applied" in str(mapped)
        assert isinstance(mapped, StoreUnavailable)


def _throwing(operation: Plan[Any], *outcomes: Result | BaseException) -> list[Statement]:
    """Drive ``operation``, answering each statement with the next outcome (a Result is
    sent, an exception thrown in); the statements sent."""
    sent: list[Statement] = []
    pending = list(outcomes)
    statement = next(operation)
    try:
        while True:
            sent.append(statement)
            outcome = pending.pop(0)
            if isinstance(outcome, BaseException):
                statement = operation.throw(outcome)
            else:
                statement = operation.send(outcome)
    except StopIteration:
        return sent


@pytest.mark.parametrize("effects", [{}, {"trace": {"k": 1}}], ids=["state-only", "function"])
def test_commit_whose_request_went_unanswered_is_outcome_unknown(effects: dict[str, Any]) -> None:
    exe = Execution(id="a", definition_id="d", version=3)
    prepared = _prepared(exe, **effects)
    lost = RequestOutcomeUnknown("postgresql://h/db", "server closed the connection")
    with pytest.raises(CommitOutcomeUnknown) as info:
        _throwing(plan.commit(prepared, None), lost)
    assert (info.value.execution_id, info.value.expected) == ("a", 3)
    assert "server closed the connection" in str(info.value)
    refused = StoreUnavailable("no connection within pool_timeout")
    fresh = _prepared(Execution(id="a", definition_id="d", version=3), **effects)
    with pytest.raises(StoreUnavailable) as plain:  # never sent: certainly not stored
        _throwing(plan.commit(fresh, None), refused)
    assert type(plain.value) is StoreUnavailable


def test_lost_state_only_cas_whose_found_read_breaks_wrote_nothing() -> None:
    prepared = _prepared(Execution(id="a", definition_id="d", version=3))
    lost = RequestOutcomeUnknown("postgresql://h/db", "cut")
    with pytest.raises(StoreUnavailable) as info:  # the CAS missed: nothing written
        _throwing(plan.commit(prepared, None), Result([], 0), lost)
    assert not isinstance(info.value, CommitOutcomeUnknown)


def test_lost_cas_whose_receipt_is_the_token_is_success() -> None:
    """The re-send of a stored commit: the CAS misses, the receipt of the version it writes
    is its token, so it answers success having written nothing else."""
    state_only = _prepared(Execution(id="a", definition_id="d", version=3))
    sent = _throwing(plan.commit(state_only, None), Result([], 0), Result([(6, state_only.token)]))
    assert len(sent) == 2
    with pytest.raises(StoreConflict):  # the same version, another commit's receipt
        _throwing(plan.commit(state_only, None), Result([], 0), Result([(4, "0" * 32)]))
    with pytest.raises(StoreConflict):  # no receipt kept (a row written before version 3)
        _throwing(plan.commit(state_only, None), Result([], 0), Result([(4, None)]))
    side = _prepared(Execution(id="a", definition_id="d", version=3), trace={"k": 1})
    assert len(_throwing(plan.commit(side, None), Result([(False, 9, side.token, False)]))) == 1
    with pytest.raises(StoreConflict) as info:
        _throwing(plan.commit(side, None), Result([(False, 9, "f" * 32, False)]))
    assert info.value.found == 9


def _fenced(**effects: Any) -> tuple[Any, Any]:
    """A commit this process stored (through the envelope) and the next one of the same
    object: the second carries the first's token as its fence."""
    exe = Execution(id="a", definition_id="d", version=3)
    first = _prepared(exe)
    return first, _prepared(exe, **effects)


def test_a_fenced_state_only_commit_checks_the_receipt_in_its_cas() -> None:
    first, second = _fenced()
    assert first.base is None and second.base == first.token
    driver = Scripted(Result([(4,)], 1), Result([(5,)], 1))
    driver.run(plan.commit(first, None))
    driver.run(plan.commit(second, None))
    plain, fenced = driver.sent
    assert " AND receipts[" not in plain.sql
    assert fenced.sql.endswith(
        "AND version = %s::bigint AND receipts[%s::int] = %s RETURNING version"
    )
    # version 4's receipt (ring slot 4 % 8 + 1) must still be the first commit's token
    assert fenced.params[-4:] == ("a", 4, 5, first.token)


def test_harel_commit_carries_the_fence_and_the_event_id() -> None:
    first, second = _fenced(processed_event_id="in", trace={"k": 1})
    driver = Scripted(Result([(True, 5, None, False)], 1))
    driver.run(plan.commit(second, None))
    (statement,) = driver.sent
    assert statement.params[9] == "in" and statement.params[26:] == (first.token, 5)


def test_a_lost_cas_is_classified_in_the_contracts_order() -> None:
    """Re-send of a stored commit first (success), then ``AlreadyProcessed`` (the mark is
    held: whatever the version), then ``StoreConflict`` (a fenced miss at the same version
    too), each from the one row ``harel_commit`` returned."""
    exe = Execution(id="a", definition_id="d", version=3)
    marked = _prepared(exe, processed_event_id="in")
    assert len(_throwing(plan.commit(marked, None), Result([(False, 4, marked.token, True)]))) == 1
    for found in (3, 4, 9):
        with pytest.raises(AlreadyProcessed) as info:
            _throwing(plan.commit(marked, None), Result([(False, found, "f" * 32, True)]))
        assert (info.value.event_id, info.value.expected, info.value.found) == ("in", 3, found)
    second = _fenced(trace={"k": 1})[1]
    with pytest.raises(StoreConflict) as conflict:  # another commit wrote version 4
        _throwing(plan.commit(second, None), Result([(False, 4, None, False)]))
    assert not isinstance(conflict.value, AlreadyProcessed)
    assert (conflict.value.expected, conflict.value.found) == (4, 4)
    state_only = _fenced()[1]
    with pytest.raises(StoreConflict) as conflict:  # the miss's read: version 4 again
        _throwing(plan.commit(state_only, None), Result([], 0), Result([(4, None)]))
    assert (conflict.value.expected, conflict.value.found) == (4, 4)


def test_connect_errors() -> None:
    refused = connect_error(psycopg.OperationalError("connection refused"), "w")
    assert isinstance(refused, StoreUnavailable)
    denied = connect_error(
        psycopg.OperationalError('FATAL: password authentication failed for user "x"'), "w"
    )
    assert isinstance(denied, StoreConfigError)


# -- plugin -------------------------------------------------------------------------------------


def test_plugin_imports_no_driver_and_no_engine() -> None:
    code = (
        "import sys, harel_store_postgres._spec as p, harel_store_postgres._options\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_pool')"
        " or m.startswith('harel.engine') or m in ('harel_store_postgres.sync', "
        "'harel_store_postgres.aio', 'harel_store_postgres._legacy')]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_registered_with_the_registry() -> None:
    import warnings

    from harel.registry import available_backends

    with warnings.catch_warnings():  # other plugins' trouble is not this backend's
        warnings.simplefilter("ignore")
        rows = available_backends()
    (info,) = [row for row in rows if row.name == "postgres"]
    assert info.status == "ok", info.error
    assert set(info.schemes) == {"postgres", "postgresql"}
    assert info.backend is not None and info.backend.harness is not None
    assert info.backend.legacy_vars == ("STM_POSTGRES_DSN",)
    assert info.backend.legacy_env == "harel_store_postgres._legacy:url_from_env"
