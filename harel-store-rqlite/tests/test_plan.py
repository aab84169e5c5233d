"""rqlite's plan and wire without a server: the shared SQL plan in rqlite's dialect stepped by
hand, the HTTP calls each request becomes, redirects, the error mapping, options and URLs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Generator
from typing import Any

import pytest
from harel.model import Event, Execution
from harel.store import TimerOp
from harel.store.common.claims import relay_due
from harel.store.common.commit import committing
from harel.store.common.enqueue import prepare_enqueue
from harel.store.common.sql import RQLITE, Batch, Result, Statement
from harel.store.errors import (
    AlreadyProcessed,
    ExecutionActive,
    InvalidPayload,
    InvalidStoreURL,
    PayloadTooLarge,
    StoreConfigError,
    StoreConflict,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
)
from harel_store_rqlite._options import make_options
from harel_store_rqlite._plan import DIALECT, EXECUTE_ONLY, open_store, rqlite_plan
from harel_store_rqlite._spec import SPEC
from harel_store_rqlite._wire import DISARM_SQL, READY, TRIPWIRE_SQL, HttpCall, HttpReply, Wire

OPTIONS = make_options("rqlite://node:4001")

# -- the plan: one request per commit and per purge ----------------------------------------------


def prepared(version: int = 0) -> Any:
    exe = Execution(id="e", definition_id="d", version=version)
    with committing(
        exe,
        [(None, Event(kind="K"))],
        "ev",
        [TimerOp.schedule("/t", 1.5), TimerOp.cancel("/u")],
        [("child", "/r", {"n": 1})],
        {"step": 1},
    ) as commit:
        return commit


def test_the_dialect_batches_reads_and_writes() -> None:
    assert DIALECT is RQLITE and RQLITE.single_request and RQLITE.batch_reads
    assert EXECUTE_ONLY.single_request and not EXECUTE_ONLY.batch_reads
    assert rqlite_plan(OPTIONS).dialect is DIALECT
    assert rqlite_plan(make_options("rqlite://n?unified=false")).dialect is EXECUTE_ONLY


def test_a_commit_is_one_batch_cas_first_found_version_last() -> None:
    op = rqlite_plan(OPTIONS).commit(prepared(), 10)
    batch = next(op)
    assert isinstance(batch, Batch)
    sqls = [s.sql for s in batch.statements]
    assert sqls[0].startswith("INSERT INTO executions") and "DO NOTHING" in sqls[0]
    assert sqls[-1].startswith("SELECT e.version, e.r0") and sqls[-1].endswith("WHERE e.id = ?")
    token = batch.statements[0].params[-1]
    assert isinstance(token, str) and len(token) == 32
    document = batch.statements[0].params[7]
    for side in batch.statements[1:-1]:  # guarded on the token, the document never repeated
        assert "commit_token = ?" in side.sql, side.sql
        assert token in side.params and document not in side.params
    replies = [Result(rowcount=1), *(Result(rowcount=1) for _ in sqls[1:-1]), Result(rows=[(1,)])]
    with pytest.raises(StopIteration):
        op.send(replies)


def test_a_lost_cas_reads_found_from_the_same_reply() -> None:
    op = rqlite_plan(OPTIONS).commit(prepared(version=4), 10)
    batch = next(op)
    assert batch.statements[0].sql.startswith("UPDATE executions")  # never an upsert at v > 0
    replies = [Result(rowcount=0), *(Result() for _ in batch.statements[1:-1]), Result(rows=[])]
    with pytest.raises(StoreConflict) as lost:
        op.send(replies)
    assert (lost.value.expected, lost.value.found) == (4, None)


def test_without_the_unified_endpoint_a_conflict_takes_a_second_read() -> None:
    plan = rqlite_plan(make_options("rqlite://n?unified=false"))
    op = plan.commit(prepared(version=2), None)
    batch = next(op)
    assert not any(s.sql.startswith("SELECT") for s in batch.statements)
    read = op.send([Result(rowcount=0)] * len(batch.statements))
    assert read == Statement(plan.sql.found_receipts.sql, ("ev", "e"))  # the mark, the row
    with pytest.raises(StoreConflict) as lost:
        op.send(Result(rows=[(7,)]))
    assert lost.value.found == 7


def ring(found: int, writes: dict[int, str], marked: bool = False) -> tuple[Any, ...]:
    """A ``found_receipts`` row: the stored version, ``r0..r7`` holding ``writes``, the mark."""
    slots: list[str | None] = [None] * 8
    for version, token in writes.items():
        slots[version % 8] = token
    return (found, *slots, int(marked))


def first_batch(op: Any) -> Batch:
    """The first request of ``op``, which must be one batch (a single-request commit)."""
    batch = next(op)
    assert isinstance(batch, Batch), batch
    return batch


def refused(op: Any, row: tuple[Any, ...]) -> tuple[Batch, BaseException]:
    """The one batch ``op`` sends and the error it raises when its CAS changes no row (every
    guarded side write then matches nothing) and the found read returns ``row``."""
    batch = first_batch(op)
    replies = [Result(rowcount=0), *(Result() for _ in batch.statements[1:-1]), Result([row])]
    with pytest.raises(StoreConflict) as error:
        op.send(replies)
    return batch, error.value


def test_an_already_processed_commit_is_refused_in_its_one_request() -> None:
    """The dedupe condition is the CAS's own: the request is the happy path's single batch,
    and the found read in it tells ``AlreadyProcessed`` apart (the version matched)."""
    commit = prepared(version=4)
    batch, error = refused(rqlite_plan(OPTIONS).commit(commit, 10), ring(4, {}, marked=True))
    cas = batch.statements[0]
    assert cas.sql.startswith("UPDATE executions") and cas.sql.endswith(
        " AND NOT EXISTS (SELECT 1 FROM processed_events WHERE execution_id = ? AND event_id = ?)"
    )
    assert cas.params[-2:] == ("e", "ev")
    assert isinstance(error, AlreadyProcessed)
    assert (error.event_id, error.expected, error.found) == ("ev", 4, 4)
    # a re-send of the stored commit still answers success (its receipt comes first)
    resent = rqlite_plan(OPTIONS).commit(commit, 10)
    batch = first_batch(resent)
    row = ring(5, {5: commit.token}, marked=True)
    with pytest.raises(StopIteration):
        resent.send(
            [Result(rowcount=0), *(Result() for _ in batch.statements[1:-1]), Result([row])]
        )


def test_a_fenced_commit_is_refused_in_its_one_request() -> None:
    """A copy this process stored carries the receipt of its version: the CAS applies only
    while the ring's slot of that version still holds it (a purged and re-created execution
    at the same version holds another)."""
    commit = prepared(version=4)._replace(base="mine")
    batch, error = refused(rqlite_plan(OPTIONS).commit(commit, 10), ring(4, {4: "theirs"}))
    cas = batch.statements[0]
    assert " AND r4 = ? AND NOT EXISTS (" in cas.sql and "mine" in cas.params
    assert type(error) is StoreConflict and (error.expected, error.found) == (4, 4)
    unfenced = first_batch(rqlite_plan(OPTIONS).commit(prepared(version=4), 10)).statements[0]
    assert " r4 = ?" not in unfenced.sql.split(" WHERE ")[1]  # a loaded copy: no fence
    state_only = Execution(id="e", definition_id="d", version=8)
    with committing(state_only, []) as plain:
        pass
    fenced = first_batch(rqlite_plan(OPTIONS).commit(plain._replace(base="mine"), None))
    assert fenced.statements[0].sql.endswith("WHERE id = ? AND version = ? AND r0 = ?")


def test_purge_is_one_batch_with_the_status_read_first() -> None:
    op = rqlite_plan(OPTIONS).purge("e", False)
    batch = next(op)
    assert batch.statements[0].sql == "SELECT status FROM executions WHERE id = ?"
    assert all(s.sql.startswith("DELETE") for s in batch.statements[1:])
    with pytest.raises(ExecutionActive):
        op.send([Result(rows=[("RUNNING",)]), *[Result()] * (len(batch.statements) - 1)])


@pytest.mark.parametrize("unified", [True, False])
def test_an_enqueue_is_one_batch_of_writes_its_seq_the_inserts_rowid(unified: bool) -> None:
    plan = rqlite_plan(make_options(f"rqlite://n?unified={str(unified).lower()}"))
    enqueue = prepare_enqueue("t", Event(id="q", kind="K"), 3)
    op = plan.enqueue(enqueue)
    batch = next(op)
    assert isinstance(batch, Batch)
    insert, touch = batch.statements  # no read: the wire sends it to /db/execute?transaction
    assert insert.sql == "INSERT INTO outbox (target_id, event) SELECT ?, ?"  # no owner guard
    assert insert.params == ("t", enqueue.emit.event_json)
    assert touch.sql.startswith("INSERT INTO work ") and "commit_token" not in touch.sql
    assert touch.params[:3] == ("t", 3, relay_due(enqueue.enqueued_at))
    with pytest.raises(StopIteration) as done:
        op.send([Result(rowcount=1, last_id=17), Result(rowcount=1, last_id=4)])
    assert done.value.value == 17
    mute = plan.enqueue(enqueue)
    next(mute)
    with pytest.raises(StoreUnavailable, match="without telling its seq"):
        mute.send([Result(rowcount=1), Result(rowcount=1)])


def test_opening_asks_readyz_then_checks_the_schema() -> None:
    op = open_store(rqlite_plan(OPTIONS), 0.0, OPTIONS)
    assert next(op) is READY
    probe = op.send("v9.1.2")  # READY's value: the node's version
    assert isinstance(probe, Statement) and probe.sql.startswith("SELECT name FROM sqlite_master")


def test_the_tripwire_and_the_disarm_ride_in_a_commit_batch() -> None:
    """A ``/db/request`` batch led by a CAS: tripwire, CAS, disarm, the rest; the extra
    statements' results are dropped."""
    wire = Wire(OPTIONS, (), {"UPDATE executions SET x = ? WHERE id = ?": (1, 0)})
    wire.cookie = 7
    batch = Batch(
        (
            Statement("UPDATE executions SET x = ? WHERE id = ?", ("tok", "e1")),
            Statement("SELECT version FROM executions WHERE id = ?", ("e1",)),
        )
    )
    exchange = wire.run(batch)
    call = next(exchange)
    assert call.body is not None
    sent = json.loads(call.body)
    assert [item[0] for item in sent] == [
        TRIPWIRE_SQL,
        "UPDATE executions SET x = ? WHERE id = ?",
        DISARM_SQL,
        "SELECT version FROM executions WHERE id = ?",
    ]
    assert sent[0][1:] == [7] and sent[2][1:] == ["e1", "tok"]
    answer = {"results": [{}, {"rows_affected": 1}, {}, {"values": [[2]]}]}
    results = finish(exchange, reply(200, answer))
    assert [r.rowcount for r in results] == [1, 0] and results[1].rows == [[2]]


# -- the wire ------------------------------------------------------------------------------------

Exchange = Generator[HttpCall, HttpReply, Any]


def reply(status: int = 200, document: Any = None, location: str | None = None) -> HttpReply:
    body = b"" if document is None else json.dumps(document).encode()
    return HttpReply(status, body, location)


def finish(exchange: Exchange, answer: HttpReply) -> Any:
    with pytest.raises(StopIteration) as done:
        exchange.send(answer)
    return done.value.value


def test_reads_go_to_query_with_the_level() -> None:
    exchange = Wire(OPTIONS).run(
        Statement("SELECT data FROM executions WHERE id = ?", ("x",)), "weak"
    )
    call = next(exchange)
    assert (call.method, call.url, call.write) == (
        "POST",
        "http://node:4001/db/query?level=weak",
        False,
    )
    assert json.loads(call.body or b"") == [["SELECT data FROM executions WHERE id = ?", "x"]]
    result = finish(
        exchange, reply(document={"results": [{"columns": ["data"], "values": [["d"]]}]})
    )
    assert result == Result(rows=[["d"]], rowcount=0)


def test_writes_go_to_execute_and_batches_in_one_transaction() -> None:
    wire = Wire(OPTIONS)
    single = wire.run(Statement("DELETE FROM outbox WHERE seq = ?", (3,)), "strong")
    call = next(single)
    assert call.url == "http://node:4001/db/execute" and call.write
    assert finish(single, reply(document={"results": [{"rows_affected": 1}]})).rowcount == 1
    writes = Batch((Statement("DELETE FROM a"), Statement("DELETE FROM b")))
    call = next(wire.run(writes, "strong"))
    assert call.url == "http://node:4001/db/execute?transaction"
    mixed = Batch((Statement("DELETE FROM a"), Statement("SELECT 1")))
    exchange = wire.run(mixed, "linearizable")
    call = next(exchange)
    assert call.url == "http://node:4001/db/request?transaction&level=linearizable"
    results = finish(exchange, reply(document={"results": [{}, {"values": [[1]]}]}))
    assert results == [Result(rows=(), rowcount=0), Result(rows=[[1]], rowcount=0)]


def test_a_writes_rowid_comes_back_from_last_insert_id() -> None:
    wire = Wire(OPTIONS)
    writes = Batch((Statement("INSERT INTO a SELECT 1"), Statement("UPDATE b SET x = 1")))
    exchange = wire.run(writes, "strong")
    assert next(exchange).url == "http://node:4001/db/execute?transaction"
    answer = {"results": [{"rows_affected": 1, "last_insert_id": 9}, {"rows_affected": 1}]}
    assert [r.last_id for r in finish(exchange, reply(document=answer))] == [9, None]
    exchange = wire.run(writes, "strong")
    next(exchange)
    with pytest.raises(StoreError, match="last_insert_id"):
        exchange.send(reply(document={"results": [{"last_insert_id": "x"}, {}]}))


def test_leader_redirects_are_followed_with_method_and_body() -> None:
    exchange = Wire(OPTIONS).run(Statement("DELETE FROM t"), "strong")
    first = next(exchange)
    second = exchange.send(reply(301, location="http://leader:4001/db/execute"))
    assert (second.method, second.url, second.body) == (
        "POST",
        "http://leader:4001/db/execute",
        first.body,
    )
    third = exchange.send(reply(307, location="/db/execute?x"))  # relative: same node
    assert third.url == "http://leader:4001/db/execute?x"
    assert finish(exchange, reply(document={"results": [{}]})) == Result(rows=(), rowcount=0)


def test_too_many_redirects_and_https_downgrades_are_refused() -> None:
    exchange = Wire(make_options("rqlite://n?redirects=1")).run(
        Statement("DELETE FROM t"), "strong"
    )
    next(exchange)
    exchange.send(reply(301, location="http://a/db/execute"))
    with pytest.raises(StoreUnavailable, match="more than 1"):
        exchange.send(reply(301, location="http://b/db/execute"))
    secure = Wire(make_options("rqlites://n")).run(Statement("DELETE FROM t"), "strong")
    assert next(secure).url.startswith("https://n:4001/")
    with pytest.raises(StoreConfigError, match="plain-HTTP"):
        secure.send(reply(301, location="http://n:4001/db/execute"))


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, StoreConfigError),
        (403, StoreConfigError),
        (503, StoreUnavailable),
        (502, StoreUnavailable),
        (413, PayloadTooLarge),
        (404, StoreError),
        (400, StoreError),
    ],
)
def test_http_statuses_become_typed_errors(status: int, error: type[Exception]) -> None:
    exchange = Wire(OPTIONS).run(Statement("SELECT 1"), "strong")
    next(exchange)
    with pytest.raises(error) as raised:
        exchange.send(HttpReply(status, b"leader not found"))
    assert "node:4001" in str(raised.value)


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("no such table: outbox", StoreCorrupted),
        ("database disk image is malformed", StoreCorrupted),
        ("string or blob too big", PayloadTooLarge),
        ("database is locked", StoreUnavailable),
        ("leader not found", StoreUnavailable),
        ('near "x": syntax error', StoreError),
    ],
)
def test_per_statement_errors_become_typed_errors(message: str, error: type[Exception]) -> None:
    exchange = Wire(OPTIONS).run(
        Batch((Statement("DELETE FROM a"), Statement("DELETE FROM b"))), "strong"
    )
    next(exchange)
    with pytest.raises(error, match="statement 2"):
        exchange.send(reply(document={"results": [{}, {"error": message}]}))


@pytest.mark.parametrize(
    "body",
    [
        b"<html>",
        b"[1]",
        b'{"results": 5}',
        b'{"results": [{}]}',
        b'{"results": [{"rows_affected": "x"}, {}]}',
    ],
)
def test_replies_that_are_not_rqlites_are_typed_errors(body: bytes) -> None:
    exchange = Wire(OPTIONS).run(
        Batch((Statement("DELETE FROM a"), Statement("DELETE FROM b"))), "strong"
    )
    next(exchange)
    with pytest.raises(StoreError, match="cannot read"):
        exchange.send(HttpReply(200, body))


def test_readyz_answers() -> None:
    wire = Wire(OPTIONS)
    for status in (200, 404):  # 404: a server without /readyz is taken as ready
        exchange = wire.run(READY, "strong")
        assert next(exchange) == HttpCall("GET", "http://node:4001/readyz")
        assert finish(exchange, HttpReply(status, b"")) is None
    exchange = wire.run(READY, "strong")
    next(exchange)
    with pytest.raises(StoreUnavailable, match="no leader"):
        exchange.send(HttpReply(503, b"[+]node ok\n[+]leader not ok"))


def test_values_that_json_cannot_carry_are_refused_before_sending() -> None:
    for bad in (float("nan"), "lone \ud800", object()):
        with pytest.raises(InvalidPayload):
            next(Wire(OPTIONS).run(Statement("SELECT ?", (bad,)), "strong"))


# -- options and URLs ----------------------------------------------------------------------------


def test_url_forms() -> None:
    assert make_options("rqlite://h").base_url == "http://h:4001"
    assert make_options("rqlites://h:443/rqlite/").base_url == "https://h:443/rqlite"
    assert make_options("rqlite://[::1]:4001").base_url == "http://[::1]:4001"
    options = make_options("rqlite://ann:s3cr%2Fet@h:1?level=weak&timeout=2.5&sweep_level=none")
    assert options.auth == ("ann", "s3cr/et")
    assert (options.level, options.sweep_level, options.timeout) == ("weak", "none", 2.5)
    assert "s3cr" not in repr(options) and "s3cr" not in options.where
    assert make_options("rqlite://h?level=linearizable").sweep_level == "linearizable"
    assert make_options("rqlite://h", trace_max=0, unified=False).unified is False


@pytest.mark.parametrize(
    "url",
    [
        "postgres://h",
        "rqlite://",
        "rqlite://local-fake",
        "rqlite://h?level=eventual",
        "rqlite://h?nope=1",
        "rqlite://h?timeout=x",
        "rqlite://u:s3cret@h:12x/x",
        "rqlite://u:s3cret@local-fake",
        "rqlites://u:s3cret@h?level=eventual",
    ],
)
def test_bad_urls_are_refused_without_their_secrets(url: str) -> None:
    with pytest.raises(InvalidStoreURL) as refused:
        make_options(url)
    assert "s3cret" not in str(refused.value)


def test_bad_keyword_knobs() -> None:
    with pytest.raises(TypeError):
        make_options("rqlite://h", bogus=1)
    with pytest.raises(ValueError, match="option timeout=0 must be a number > 0"):
        make_options("rqlite://h", timeout=0)
    with pytest.raises(ValueError):
        make_options("rqlite://h", level="eventual")
    with pytest.raises(InvalidStoreURL, match="did you mean level"):
        SPEC.open_args("rqlite://h", {"levle": 1})
    with pytest.raises(ValueError):
        SPEC.open_args("rqlite://h", {"connect_retries": -1})
    arguments, retry = SPEC.open_args("rqlite://h", {"connect_retries": 2, "level": "weak"})
    assert arguments["level"] == "weak" and retry["retries"] == 2


def test_tls_settings() -> None:
    assert make_options("rqlite://h").tls() is False  # plain HTTP: nothing to set up
    assert make_options("rqlites://h?verify=false").tls() is False
    context = make_options("rqlites://h").tls()
    assert context is make_options("rqlites://other").tls()  # shared, built once


def test_legacy_variable() -> None:
    assert SPEC.legacy_url({}) is None
    assert SPEC.legacy_url({"STM_RQLITE_URL": " "}) is None
    assert SPEC.legacy_url({"STM_RQLITE_URL": "http://n:4001"}) == "rqlite://n:4001"
    assert SPEC.legacy_url({"STM_RQLITE_URL": "https://u:p@n"}) == "rqlites://u:p@n"
    assert SPEC.legacy_url({"STM_RQLITE_URL": "rqlite://n"}) == "rqlite://n"


def test_the_sans_io_modules_import_no_http_client() -> None:
    code = (
        "import sys, harel_store_rqlite._plan, harel_store_rqlite._wire\n"
        "import harel_store_rqlite._spec, harel_store_rqlite._options\n"
        "assert 'httpx' not in sys.modules, 'httpx imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
