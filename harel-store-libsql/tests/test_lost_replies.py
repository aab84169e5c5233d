"""A libSQL server (``libsql://``) can fail after a request was sent: the commit then says so.

No sqld runs here, so the network is simulated on the real driver: a store over a local file is
given server options (``libsql://...``: errors are mapped as for a server) and a connection
that fails one chosen statement with the driver's Hrana stream error, either before sending it
(the request is lost: nothing applied) or after running it (the reply is lost: applied).  The
commit must answer ``CommitOutcomeUnknown`` exactly when the statement may have taken effect
(a ``COMMIT`` or an autocommit write), plain ``StoreUnavailable`` otherwise, and the re-send
the contract asks for must settle it: stored exactly once, never twice, never misreported.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from harel.model import Event, Execution
from harel.store.common.sql.errors import RequestOutcomeUnknown
from harel.store.errors import CommitOutcomeUnknown, StoreConflict, StoreUnavailable
from harel_store_libsql import LibsqlStore
from harel_store_libsql._driver import may_apply
from harel_store_libsql._errors import driver_error
from harel_store_libsql._options import make_options

LOST = "Hrana: `stream error: connection reset by peer`"
"""The driver's text for a stream cut under a request (a ``ValueError``)."""

Loss = Literal["request", "reply"]


class Flaky:
    """The store's real connection; the first statement starting with ``verb`` (after
    ``skip`` such statements) fails like a cut stream, before or after it ran."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.armed: tuple[str, Loss] | None = None

    def arm(self, verb: str, loss: Loss) -> None:
        self.armed = (verb, loss)

    def execute(self, sql: str, params: Any = ()) -> Any:
        if self.armed is not None and sql.startswith(self.armed[0]):
            loss = self.armed[1]
            self.armed = None
            if loss == "reply":
                self.conn.execute(sql, params)
            raise ValueError(LOST)
        return self.conn.execute(sql, params)

    @property
    def in_transaction(self) -> bool:
        return bool(self.conn.in_transaction)

    def rollback(self) -> None:
        self.conn.rollback()

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[LibsqlStore, Flaky]]:
    """A store whose errors are mapped as a ``libsql://`` server's, over a flaky connection."""
    store = LibsqlStore(str(tmp_path / "server.db"))
    store.options = make_options("http://127.0.0.1:9")
    flaky = Flaky(store._conn)
    store._conn = flaky
    yield store, flaky
    store.close()


def stored(store: LibsqlStore) -> Execution:
    exe = Execution(id="e", definition_id="d", context={"n": 0})
    store.commit(exe, [])
    return exe


def test_a_lost_reply_to_a_state_only_commit_is_unknown_and_the_resend_settles_it(
    remote: tuple[LibsqlStore, Flaky],
) -> None:
    store, flaky = remote
    exe = stored(store)
    exe.context = {"n": 1}
    flaky.arm("UPDATE", "reply")
    with pytest.raises(CommitOutcomeUnknown) as raised:
        store.commit(exe, [])
    assert (raised.value.execution_id, raised.value.expected) == ("e", 1)
    assert isinstance(raised.value, StoreUnavailable) and exe.version == 1
    store.commit(exe, [])  # the re-send: the receipt says it was stored
    assert exe.version == 2
    loaded = store.load("e")
    assert loaded is not None and loaded.version == 2 and loaded.context == {"n": 1}


def test_a_lost_reply_to_a_commit_statement_is_unknown_and_stored_once(
    remote: tuple[LibsqlStore, Flaky],
) -> None:
    store, flaky = remote
    exe = stored(store)
    args: tuple[Any, ...] = ([(None, Event(id="once", kind="K"))], "in-1")
    flaky.arm("COMMIT", "reply")
    with pytest.raises(CommitOutcomeUnknown):
        store.commit(exe, *args)
    assert exe.version == 1
    store.commit(exe, *args)
    assert exe.version == 2
    assert [entry.event.id for entry in store.pending_outbox()] == ["once"]
    assert store.is_processed("e", "in-1")


def test_a_lost_request_inside_the_transaction_is_plain_unavailable_and_wrote_nothing(
    remote: tuple[LibsqlStore, Flaky],
) -> None:
    store, flaky = remote
    exe = stored(store)
    args: tuple[Any, ...] = ([(None, Event(id="later", kind="K"))], "in-1")
    flaky.arm("INSERT INTO outbox", "request")
    with pytest.raises(StoreUnavailable) as raised:
        store.commit(exe, *args)
    assert not isinstance(raised.value, CommitOutcomeUnknown), "nothing may have been applied"
    assert exe.version == 1 and store.pending_outbox() == []
    loaded = store.load("e")
    assert loaded is not None and loaded.version == 1
    store.commit(exe, *args)
    assert [entry.event.id for entry in store.pending_outbox()] == ["later"]


def test_an_unknown_commit_that_lost_to_a_rival_is_a_conflict_on_resend(
    remote: tuple[LibsqlStore, Flaky], tmp_path: Path
) -> None:
    store, flaky = remote
    exe = stored(store)
    exe.context = {"by": "mine"}
    flaky.arm("UPDATE", "request")  # the autocommit CAS never arrived: the store cannot know
    with pytest.raises(CommitOutcomeUnknown):
        store.commit(exe, [])
    with LibsqlStore(str(tmp_path / "server.db")) as rival:
        other = rival.load("e")
        assert other is not None
        other.context = {"by": "rival"}
        rival.commit(other, [(None, Event(id="rival", kind="K"))])
    with pytest.raises(StoreConflict):
        store.commit(exe, [])
    assert exe.version == 1
    loaded = store.load("e")
    assert loaded is not None and loaded.context == {"by": "rival"}


def test_a_lost_reply_outside_a_commit_is_plain_unavailable(
    remote: tuple[LibsqlStore, Flaky],
) -> None:
    store, flaky = remote
    stored(store)
    flaky.arm("DELETE", "reply")
    with pytest.raises(StoreUnavailable) as raised:
        store.ack_outbox(1)
    assert not isinstance(raised.value, CommitOutcomeUnknown)


def test_which_statements_may_apply_on_their_own() -> None:
    class Conn:
        in_transaction = False

    idle, busy = Conn(), Conn()
    busy.in_transaction = True
    assert may_apply("COMMIT", busy) and may_apply("UPDATE executions SET", idle)
    assert may_apply("INSERT INTO executions", idle) and may_apply("DELETE FROM outbox", idle)
    assert not may_apply("UPDATE executions SET", busy)
    assert not may_apply("BEGIN IMMEDIATE", idle) and not may_apply("ROLLBACK", busy)
    assert not may_apply("SELECT version FROM executions", idle)


def test_a_local_file_never_reports_an_unknown_outcome(tmp_path: Path) -> None:
    options = make_options(str(tmp_path / "x.db"))
    error = driver_error(ValueError(LOST), options, may_apply=True)
    assert not isinstance(error, RequestOutcomeUnknown)
    server = make_options("http://127.0.0.1:9")
    assert isinstance(driver_error(ValueError(LOST), server, may_apply=True), RequestOutcomeUnknown)
    plain = driver_error(ValueError(LOST), server, may_apply=False)
    assert isinstance(plain, StoreUnavailable) and not isinstance(plain, RequestOutcomeUnknown)
