"""Read-only opens (``open_store(url, create=False)``, ``harel list``) create nothing on an
rqlite node: one read through the query endpoint, no table, no write (issue 19)."""

from __future__ import annotations

import sqlite3

import pytest
from harel.cli import main
from harel.registry import open_store
from harel.store.errors import StoreNotFound, StoreUnavailable
from harel_testing.rqlite import FakeRqlite


def tables(node: FakeRqlite) -> list[str]:
    with sqlite3.connect(node.path) as conn:
        return [row[0] for row in conn.execute("SELECT name FROM sqlite_master")]


def test_list_on_a_fresh_node_says_so_with_one_read_and_creates_no_table(
    node: FakeRqlite, capsys: pytest.CaptureFixture[str]
) -> None:
    node.take_requests()
    code = main(["list", "--store", node.url])
    err = capsys.readouterr().err
    assert code == 2 and "there is no rqlite store at rqlite://" in err
    assert "nothing was created" in err
    assert [f"{r.method} {r.path}" for r in node.take_requests()] == ["POST /db/query"]
    assert tables(node) == []


def test_create_false_opens_the_store_once_created(node: FakeRqlite) -> None:
    open_store(node.url).close()
    assert "harel_schema" in tables(node)
    store = open_store(node.url, create=False)
    try:
        assert store.list_executions().items == []
    finally:
        store.close()


def test_create_false_without_a_leader_or_node_is_unavailable(node: FakeRqlite) -> None:
    node.leader = False
    with pytest.raises(StoreUnavailable, match="no leader"):
        open_store(node.url, create=False, connect_retries=0)
    node.leader = True
    node.stop()
    with pytest.raises(StoreUnavailable):
        open_store(node.url, create=False, connect_retries=0)
    node.start()
    with pytest.raises(StoreNotFound):  # back up: still nothing there
        open_store(node.url, create=False, connect_retries=0)
    assert tables(node) == []
