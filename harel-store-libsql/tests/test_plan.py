"""libSQL's plan without a store: it is the SQL family's plan in SQLite's dialect, unchanged.

What is libSQL's own lives next to the plan and is pure: how values are bound for the driver
(``bindable``) and which PRAGMAs a mode runs.  The shared plan's control flow is stepped by hand
in harel-store-sqlite's test_plan.py (every dialect variant); here every statement of the
shared description is prepared by libSQL's own engine, whose SQLite base (3.42) is older than
the system's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import libsql  # type: ignore[import-untyped]
import pytest
from harel.model import Event
from harel.store.common.drive import drive
from harel.store.common.enqueue import prepare_enqueue
from harel.store.common.sql import SQLITE, Rendered, Statement, statements_for
from harel.store.errors import InvalidPayload
from harel_store_libsql._driver import bindable, execute
from harel_store_libsql._options import make_options
from harel_store_libsql._plan import DIALECT, libsql_plan
from harel_store_libsql._schema import pragmas


def test_the_plan_is_the_sql_familys_in_sqlites_dialect() -> None:
    plan = libsql_plan(make_options("app.db"))
    assert DIALECT is SQLITE
    assert plan.sql is statements_for(SQLITE)  # the very statements SQLite runs: no copy
    assert plan.where == "libSQL database 'app.db'"


def rendered(value: Any) -> Iterator[Rendered]:
    if isinstance(value, Rendered):
        yield value
    elif isinstance(value, tuple):
        for item in value:
            yield from rendered(item)


def every_statement() -> Iterator[tuple[str, Rendered]]:
    """Every rendered statement of the description (schema upgrades aside: they target an
    older layout) plus the listing's variants."""
    sql = statements_for(SQLITE)
    for name, value in vars(sql).items():
        if name in ("ddl", "upgrades", "dialect"):
            continue
        for n, statement in enumerate(rendered(value)):
            yield f"{name}[{n}]", statement
    clauses = ("id > :after", "definition_id = :definition_id", "parent_id IS NULL")
    for statuses in range(4):
        yield f"listing[{statuses}]", sql.listing(clauses, statuses)


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[Any]:
    options = make_options(str(tmp_path / "plan.db"))
    connection = libsql.connect(options.database, **options.connect_kwargs())
    drive(
        libsql_plan(options).open_schema(0.0), lambda request: execute(connection, options, request)
    )
    yield connection
    connection.close()


def test_every_shared_statement_prepares_on_libsqls_engine(conn: Any) -> None:
    seen = 0
    for name, statement in every_statement():
        params = tuple(None for _ in statement.slots)
        try:
            conn.execute("EXPLAIN " + statement.sql, params).fetchall()
        except ValueError as exc:  # pragma: no cover - the failure names the statement
            pytest.fail(f"{name} does not prepare on libSQL: {exc}\n{statement.sql}")
        seen += 1
    assert seen > 30


def test_enqueue_reads_its_seq_from_libsqls_returning_row(tmp_path: Path, conn: Any) -> None:
    options = make_options(str(tmp_path / "plan.db"))
    plan = libsql_plan(options)
    sent: list[str] = []

    def run(request: Any) -> Any:
        assert isinstance(request, Statement)
        sent.append(request.sql.split(" ")[0])
        return execute(conn, options, request)

    seqs = [
        drive(plan.enqueue(prepare_enqueue("t", Event(id=f"q{n}", kind="K"), 2)), run)
        for n in range(2)
    ]
    assert seqs == [1, 2]
    assert sent == ["BEGIN", "INSERT", "INSERT", "COMMIT"] * 2  # the outbox row, the work row
    assert conn.execute("SELECT seq, target_id FROM outbox").fetchall() == [(1, "t"), (2, "t")]
    assert conn.execute("SELECT key, priority, owner FROM work").fetchall() == [("t", 2, None)]


@pytest.mark.parametrize(
    ("value", "bound"),
    [
        (0, 0),
        (2**31 - 1, 2**31 - 1),
        (-(2**31), -(2**31)),
        (2**31, "2147483648"),
        (-(2**31) - 1, "-2147483649"),
        (2**63 - 1, "9223372036854775807"),
        (True, True),  # bools are bound as 0/1 by the driver itself
        (1.5, 1.5),
        (-0.0, -0.0),
        (None, None),
        ("text", "text"),
        ("\U0010ffff plane 16", "\U0010ffff plane 16"),
    ],
)
def test_bindable_sends_wide_ints_as_text(value: Any, bound: Any) -> None:
    result = bindable(value)
    assert result == bound and type(result) is type(bound)


def test_bindable_refuses_nul_instead_of_truncating() -> None:
    with pytest.raises(InvalidPayload, match="NUL"):
        bindable("before\x00after")


def test_pragmas_per_mode() -> None:
    assert pragmas(make_options("a.db")) == [
        "PRAGMA journal_mode = WAL",
        "PRAGMA synchronous = FULL",
    ]
    assert pragmas(make_options(":memory:", synchronous="normal")) == [
        "PRAGMA synchronous = NORMAL"
    ]
    assert pragmas(make_options("https://db.example.com")) == []  # the server owns its journal
    replica = make_options("r.db", sync_url="https://db.example.com", auth_token="t0k3n")
    assert pragmas(replica) == []  # the replication engine owns the replica's file


def test_connect_arguments_per_mode() -> None:
    local = make_options("a.db").connect_kwargs()
    assert local == {"isolation_level": None, "_check_same_thread": False, "timeout": 0.0}
    server = make_options("https://db.example.com", auth_token="t0k3n").connect_kwargs()
    assert server == {"isolation_level": None, "_check_same_thread": False, "auth_token": "t0k3n"}
    replica = make_options(
        "r.db", sync_url="libsql://db.example.com", auth_token="t0k3n", sync_interval=2
    ).connect_kwargs()
    assert replica["sync_url"] == "libsql://db.example.com" and replica["sync_interval"] == 2.0
