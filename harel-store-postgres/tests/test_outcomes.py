"""Commit outcomes and outages on a real server, through the kit's FaultProxy (issue 17 §1).

* A commit whose connection breaks after its request was forwarded raises
  ``CommitOutcomeUnknown`` (never a plain ``StoreUnavailable``, which means nothing was
  written); the re-sent commit is recognised by its receipt and answers success, and a commit
  that becomes visible only *after* the error (the server finished it later) is settled the same
  way, never applied twice; a re-send that cannot reach the server stays outcome-unknown.
* While the server is unreachable (the proxy refuses connections; the shared server is never
  stopped) calls fail with a plain ``StoreUnavailable`` and nothing is written; once it is back,
  the same store object serves again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import psycopg
import pytest
from harel.conformance.proxy import FaultProxy
from harel.model import Event, Execution
from harel.store.errors import CommitOutcomeUnknown, StoreUnavailable
from harel_store_postgres import AsyncPostgresStore, PostgresStore
from harel_store_postgres._options import PostgresOptions
from harel_store_postgres.testing import PostgresHarness

MARKER = "pg-outcome-marker"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fault(harel_harness: PostgresHarness) -> Iterator[FaultProxy]:
    address = harel_harness.server_address()
    assert address is not None, "the test server must be reachable over TCP"
    harel_harness.open_sync().close()  # the layout, made without the proxy
    with FaultProxy(*address) as proxy:
        yield proxy


def _outbox(harness: PostgresHarness, event_id: str) -> int:
    with harness.connect() as conn:
        row = conn.execute(
            psycopg.sql.SQL("SELECT count(*) FROM {}.outbox WHERE event LIKE %s").format(
                psycopg.sql.Identifier(harness.schema)
            ),
            (f"%{event_id}%",),
        ).fetchone()
    return int(row[0]) if row else 0


def _stored_version(harness: PostgresHarness, execution_id: str) -> int | None:
    with harness.connect() as conn:
        row = conn.execute(
            psycopg.sql.SQL("SELECT version FROM {}.executions WHERE id = %s").format(
                psycopg.sql.Identifier(harness.schema)
            ),
            (execution_id,),
        ).fetchone()
    return None if row is None else int(row[0])


# -- lost replies --------------------------------------------------------------------------------


@pytest.mark.parametrize("side_writes", [False, True], ids=["state-only", "with-emit"])
def test_lost_reply_is_outcome_unknown_and_the_resend_succeeds(
    harel_harness: PostgresHarness, fault: FaultProxy, side_writes: bool
) -> None:
    """The reply of a stored commit is lost: ``CommitOutcomeUnknown`` (the old store said
    plain ``StoreUnavailable``, and its re-send then got ``StoreConflict``)."""
    store = harel_harness.open_sync_at(fault.host, fault.port)
    exe = Execution(id="lost", definition_id="d", context={"n": 0})
    store.save(exe)
    exe.context = {"n": 1, "tag": MARKER}  # the state-only commit carries it in the document
    emits = [(None, Event(id=f"{MARKER}-e", kind="K"))] if side_writes else []
    fault.arm("drop_reply", marker=MARKER.encode())
    with pytest.raises(CommitOutcomeUnknown) as info:
        store.commit(exe, emits)
    assert fault.fired
    assert (info.value.execution_id, info.value.expected, exe.version) == ("lost", 1, 1)
    assert "re-send the same commit" in str(info.value)
    assert _stored_version(harel_harness, "lost") == 2  # it was stored
    store.commit(exe, emits)  # the re-send: recognised by its receipt
    assert exe.version == 2 and _stored_version(harel_harness, "lost") == 2
    assert _outbox(harel_harness, f"{MARKER}-e") == (1 if side_writes else 0)
    store.close()


@pytest.mark.parametrize("mode", ["drop_request", "cut_after_forward"])
@pytest.mark.anyio
async def test_async_cut_connection_is_outcome_unknown(
    harel_harness: PostgresHarness, fault: FaultProxy, mode: Any
) -> None:
    store = await harel_harness.open_async_at(fault.host, fault.port)
    try:
        exe = Execution(id="cut", definition_id="d")
        await store.save(exe)
        emits = [(None, Event(id=f"{MARKER}-a", kind="K"))]
        fault.arm(mode, marker=MARKER.encode())
        with pytest.raises(CommitOutcomeUnknown):
            await store.commit(exe, emits)
        assert exe.version == 1
        await store.commit(exe, emits)  # applied now, or recognised: stored once either way
        assert exe.version == 2
        assert _outbox(harel_harness, f"{MARKER}-a") == 1
    finally:
        await store.close()


def _wait_for_lock_waiters(harness: PostgresHarness, count: int) -> None:
    """Until ``count`` backends of the harness's schema wait on a lock (bounded polling: a
    synchronisation point, not a timing assertion)."""
    for _ in range(2000):
        with harness.connect(autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE %s",
                (f"%{harness.schema}%",),
            ).fetchone()
        if row and row[0] >= count:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"never saw {count} commit(s) waiting on the row lock")


@pytest.mark.parametrize("side_writes", [False, True], ids=["state-only", "with-emit"])
def test_commit_visible_after_the_error_is_settled_by_the_resend(
    harel_harness: PostgresHarness, fault: FaultProxy, side_writes: bool
) -> None:
    """The issue's worst case: the connection breaks while the server still works on the
    commit (here: waiting for a row lock), so a reload right after the error sees nothing and
    the commit lands later.  The error says the outcome is unknown; the re-send, racing the
    first attempt, answers success and the step is stored exactly once."""
    store = harel_harness.open_sync_at(fault.host, fault.port)
    exe = Execution(id="late", definition_id="d", context={"n": 0})
    store.save(exe)
    exe.context = {"n": 1, "tag": MARKER}
    emits = [(None, Event(id=f"{MARKER}-late", kind="K"))] if side_writes else []
    locker = harel_harness.connect()
    try:
        locker.execute(
            psycopg.sql.SQL("SELECT 1 FROM {}.executions WHERE id = 'late' FOR UPDATE").format(
                psycopg.sql.Identifier(harel_harness.schema)
            )
        )
        fault.arm("cut_after_forward", marker=MARKER.encode())
        with pytest.raises(CommitOutcomeUnknown):
            store.commit(exe, emits)
        _wait_for_lock_waiters(harel_harness, 1)  # the first attempt is still on the server
        loaded = store.load("late")
        assert loaded is not None and loaded.version == 1, "not visible yet"
        outcome: list[BaseException | None] = []

        def resend() -> None:
            try:
                store.commit(exe, emits)
                outcome.append(None)
            except BaseException as exc:  # reported below
                outcome.append(exc)

        thread = threading.Thread(target=resend)
        thread.start()
        _wait_for_lock_waiters(harel_harness, 2)  # the re-send races the first attempt
        locker.commit()  # the row lock goes: the first attempt lands, the re-send sees it
        thread.join(timeout=30)
        assert outcome == [None], outcome
    finally:
        locker.close()
    assert exe.version == 2
    assert _stored_version(harel_harness, "late") == 2
    assert _outbox(harel_harness, f"{MARKER}-late") == (1 if side_writes else 0)
    store.close()


# -- outages -------------------------------------------------------------------------------------


def _outage_options(harness: PostgresHarness, proxy: FaultProxy) -> PostgresOptions:
    """Short waits, so the outage outlasts several reconnect attempts in a few seconds: each
    call waits 1.5 s in all, the pool gives a lost connection up after 0.5 s."""
    return replace(
        harness.options_at(proxy.host, proxy.port),
        pool_timeout=1.5,
        reconnect_timeout=0.5,
        pool_max=2,
    )


def test_outage_fails_plainly_then_the_same_store_recovers(
    harel_harness: PostgresHarness, fault: FaultProxy
) -> None:
    """Server unreachable: every call raises plain ``StoreUnavailable`` (nothing sent, so a
    commit is NOT outcome-unknown and nothing is written); the outage outlasts several of the
    pool's reconnect attempts; the first call after the server is back succeeds, on the same
    store object."""
    store = PostgresStore.open(_outage_options(harel_harness, fault))
    exe = Execution(id="out", definition_id="d")
    store.save(exe)
    fault.down()
    with pytest.raises(StoreUnavailable):
        store.load("out")
    for n in range(4):
        exe.context = {"n": n}
        with pytest.raises(StoreUnavailable) as info:
            store.commit(exe, [(None, Event(id=f"down-{n}", kind="K"))])
        assert not isinstance(info.value, CommitOutcomeUnknown), info.value
        assert exe.version == 1
    assert _stored_version(harel_harness, "out") == 1 and _outbox(harel_harness, "down-") == 0
    fault.up()
    exe.context = {"back": True}
    store.commit(exe, [(None, Event(id="back-1", kind="K"))])  # the first call after the outage
    assert exe.version == 2 and _outbox(harel_harness, "back-1") == 1
    store.close()


def test_resend_during_an_outage_stays_outcome_unknown(
    harel_harness: PostgresHarness, fault: FaultProxy
) -> None:
    """A commit whose reply was lost, re-sent while the server is unreachable: the re-send
    reaches nothing, but the first attempt IS stored, so the answer must stay
    ``CommitOutcomeUnknown`` (a plain ``StoreUnavailable`` would say "not stored"); the re-send
    once the server is back answers success."""
    store = PostgresStore.open(_outage_options(harel_harness, fault))
    exe = Execution(id="unsettled", definition_id="d")
    store.save(exe)
    emits = [(None, Event(id=f"{MARKER}-u", kind="K"))]
    fault.arm("drop_reply", marker=MARKER.encode())
    with pytest.raises(CommitOutcomeUnknown):
        store.commit(exe, emits)
    fault.down()
    with pytest.raises(CommitOutcomeUnknown) as info:
        store.commit(exe, emits)
    assert "earlier attempt" in str(info.value) and exe.version == 1
    fault.up()
    store.commit(exe, emits)
    assert exe.version == 2 and _outbox(harel_harness, f"{MARKER}-u") == 1
    store.close()


@pytest.mark.anyio
async def test_async_outage_fails_plainly_then_the_same_store_recovers(
    harel_harness: PostgresHarness, fault: FaultProxy
) -> None:
    store = await AsyncPostgresStore.open(_outage_options(harel_harness, fault))
    try:
        exe = Execution(id="out", definition_id="d")
        await store.save(exe)
        fault.down()
        with pytest.raises(StoreUnavailable):
            await store.load("out")
        for n in range(4):
            exe.context = {"n": n}
            with pytest.raises(StoreUnavailable) as info:
                await store.commit(exe, [(None, Event(id=f"down-{n}", kind="K"))])
            assert not isinstance(info.value, CommitOutcomeUnknown), info.value
            assert exe.version == 1
        assert _stored_version(harel_harness, "out") == 1
        fault.up()
        await store.commit(exe, [(None, Event(id="back-1", kind="K"))])
        assert exe.version == 2 and _outbox(harel_harness, "back-1") == 1
    finally:
        await store.close()
