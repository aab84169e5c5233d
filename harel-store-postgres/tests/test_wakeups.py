"""Wake-ups on PostgreSQL: LISTEN on the schema's channel, NOTIFY from the writes that touch
work rows (harel.conformance.wakeups' checks, plus what only this backend has)."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from harel.conformance.wakeups import LONG, check_async_wakeups, check_sync_wakeups
from harel.model import Event, Execution
from harel.store.errors import StoreUnavailable
from harel_store_postgres import AsyncPostgresStore
from harel_store_postgres._schema import WAKE_CHANNEL_SQL
from harel_store_postgres._wake import channel
from harel_store_postgres.testing import PostgresHarness
from psycopg import sql


def test_wakeups_sync(harel_harness: PostgresHarness) -> None:
    check_sync_wakeups(harel_harness.open_sync)


@pytest.mark.anyio
async def test_wakeups_async(harel_harness: PostgresHarness) -> None:
    await check_async_wakeups(harel_harness.open_async)


@pytest.mark.anyio
@pytest.mark.harel_trio
@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_wakeups_under_trio(harel_harness: PostgresHarness, anyio_backend: str) -> None:
    pytest.importorskip("trio")

    async def open_store() -> AsyncPostgresStore:
        return await AsyncPostgresStore.from_url(harel_harness.url(), connect_retries=0)

    await check_async_wakeups(open_store, prefix="trio")


@pytest.mark.parametrize("schema", ["harel", "x" * 63, 'Ünïcode schema "quoted"'])
def test_the_channel_is_the_one_the_functions_compute(pg_url: str, schema: str) -> None:
    harness = PostgresHarness(pg_url, connect_retries=0, reuse=False)
    with harness.connect() as conn:
        expression = WAKE_CHANNEL_SQL.replace("current_schema()", "%s::text")
        row = conn.execute("SELECT " + expression, (schema,)).fetchone()
    assert row is not None and row[0] == channel(schema)
    assert len(channel(schema).encode()) <= 63


def test_an_enqueue_notifies_its_schemas_channel_whatever_the_name(pg_url: str) -> None:
    """``enqueue``'s statement computes the channel from the schema its outbox row went to:
    the name :func:`channel` computes, quotes and non-ASCII included."""
    schema = f"Enq 'q' \"x\" Ü {uuid.uuid4().hex[:8]}"
    harness = PostgresHarness(pg_url, schema=schema, connect_retries=0, reuse=False)
    store = harness.open_sync()
    try:
        with harness.connect(autocommit=True) as listener:
            listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel(schema))))
            seq = store.enqueue("enq-t", Event(id="q1", kind="Go"))
            heard = [n.channel for n in listener.notifies(timeout=LONG, stop_after=1)]
        assert heard == [channel(schema)]
        assert [(e.seq, e.target_id) for e in store.pending_outbox()] == [(seq, "enq-t")]
    finally:
        store.close()
        harness.destroy()


def test_a_lost_listener_is_unavailable_then_listens_again(harel_harness: PostgresHarness) -> None:
    waiter, writer = harel_harness.open_sync(), harel_harness.open_sync()
    waiter.wait_for_work(0)  # listening
    handle = waiter._wakeups._handle
    assert handle is not None
    with harel_harness.connect() as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (handle.info.backend_pid,))
    with pytest.raises(StoreUnavailable, match="wake-up connection"):
        waiter.wait_for_work(LONG)
    assert waiter.wait_for_work(0) is True  # listens again: True at once
    assert waiter.wait_for_work(0) is False
    writer.commit(Execution(id="lost-a", definition_id="d"), [("lost-b", Event(id="e", kind="Go"))])
    assert waiter.wait_for_work(LONG) is True


def test_psycopg_has_timed_notifies() -> None:
    """The waiter relies on ``notifies(timeout=, stop_after=)`` (psycopg 3.2+)."""
    major, minor = (int(part) for part in psycopg.__version__.split(".")[:2])
    assert (major, minor) >= (3, 2)
