"""Issue 17 §1/§4/§5: busy items retried, a missing table is definite, the table check is keyed
by endpoint, region and injected client, re-sent commits settle by the commit token, and the
reference implementation's constructors work.

Faults are injected at the client (a wrapper around a real boto3 client talking to the moto
server), so every test is deterministic: no timing, no sleeping for effect.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import (  # type: ignore[import-untyped, unused-ignore]
    ClientError,
    ReadTimeoutError,
)
from harel.model import Event, Execution
from harel.store.contract import TimerOp
from harel.store.errors import CommitOutcomeUnknown, StoreConflict, StoreUnavailable
from harel_store_dynamodb import AsyncDynamoDBStore, DynamoDBStore
from harel_store_dynamodb._requests import TableNotFound
from harel_store_dynamodb._schema import META_KEY
from harel_store_dynamodb.sync import open_client
from harel_store_dynamodb.testing import DynamoDBHarness, new_table_name

WRITES = ("transact_write_items", "update_item", "delete_item", "put_item")
Fault = Callable[[Callable[[], Any]], Any]


class Faulty:
    """A boto3 client whose next writes go through ``faults`` (one each, in order); every
    call's operation name is recorded in ``sent``."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.faults: list[Fault] = []
        self.sent: list[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if not callable(method):
            return method

        def call(**params: Any) -> Any:
            self.sent.append(name)
            if name not in WRITES or not self.faults:
                return method(**params)
            return self.faults.pop(0)(lambda: method(**params))

        return call


def client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "injected"}}, "UpdateItem")


def busy(send: Callable[[], Any]) -> Any:
    """DynamoDB's answer for an item inside another in-flight transaction (nothing applied)."""
    raise client_error("TransactionConflictException")


def lost_after_landing(send: Callable[[], Any]) -> Any:
    send()
    raise ReadTimeoutError(endpoint_url="http://moto")


def never_answered(send: Callable[[], Any]) -> Any:
    raise ReadTimeoutError(endpoint_url="http://moto")


@pytest.fixture
def faulty_store(
    harness: DynamoDBHarness,
) -> Iterator[tuple[DynamoDBStore, DynamoDBStore, Faulty]]:
    """A store over a faulty client (no hidden botocore retries) and a healthy one."""
    raw = open_client(harness.options, harness.options.endpoint_url)
    faulty = Faulty(raw)
    store = DynamoDBStore(harness.table, client=faulty, create_table=True, max_attempts=1)
    other = harness.open_sync()
    yield store, other, faulty
    store.close()
    raw.close()


def started(store: DynamoDBStore, execution_id: str) -> Execution:
    store.commit(Execution(id=execution_id, definition_id="d"), [])
    exe = store.load(execution_id)
    assert exe is not None
    return exe


# -- TransactionConflictException ----------------------------------------------------------


@pytest.mark.parametrize("emits", [False, True], ids=["update_item", "transaction"])
def test_a_busy_item_is_retried_and_the_commit_lands_once(
    faulty_store: tuple[DynamoDBStore, DynamoDBStore, Faulty], emits: bool
) -> None:
    store, other, faulty = faulty_store
    mine = started(store, "b1")
    faulty.faults = [busy, busy]
    store.commit(mine, [(None, Event(id="e1", kind="Go"))] if emits else [])
    assert mine.version == 2
    stored = other.load("b1")
    assert stored is not None and stored.version == 2
    assert [e.event.id for e in other.pending_outbox()] == (["e1"] if emits else [])


def test_a_commit_that_stays_busy_is_unavailable_and_wrote_nothing(
    faulty_store: tuple[DynamoDBStore, DynamoDBStore, Faulty],
) -> None:
    store, other, faulty = faulty_store
    mine = started(store, "b2")
    faulty.faults = [busy] * 50
    with pytest.raises(StoreUnavailable) as info:
        store.commit(mine, [])
    assert not isinstance(info.value, CommitOutcomeUnknown), "a refusal is definite"
    assert info.value.retryable is True
    assert mine.version == 1
    stored = other.load("b2")
    assert stored is not None and stored.version == 1


def test_acks_and_timer_deletes_retry_a_busy_item(
    faulty_store: tuple[DynamoDBStore, DynamoDBStore, Faulty],
) -> None:
    store, other, faulty = faulty_store
    exe = Execution(id="b3", definition_id="d")
    other.commit(exe, [(None, Event(id="e1", kind="Go"))], timers=[])
    other.commit(exe, [], timers=[TimerOp.schedule("/t", 5.0)])
    seq = other.pending_outbox()[0].seq
    faulty.faults = [busy, busy]
    store.ack_outbox(seq)
    assert other.pending_outbox() == []
    faulty.faults = [busy]
    store.delete_timer("b3", "/t", 5.0)
    assert other.due_timers(10.0) == []


# -- a missing table -------------------------------------------------------------------------


def test_a_commit_to_a_missing_table_fails_at_once_as_table_not_found(
    faulty_store: tuple[DynamoDBStore, DynamoDBStore, Faulty], harness: DynamoDBHarness
) -> None:
    store, other, faulty = faulty_store
    mine = started(store, "m1")
    other._client.delete_table(TableName=harness.table)
    for args in ([], [(None, Event(id="e", kind="Go"))]):
        faulty.sent.clear()
        with pytest.raises(TableNotFound) as info:
            store.commit(mine, args)
        assert not isinstance(info.value, CommitOutcomeUnknown)
        assert mine.version == 1
        assert len(faulty.sent) == 1, f"resent a definite refusal: {faulty.sent}"
    with pytest.raises(TableNotFound):
        store.load("m1")  # reads raise the same type


# -- the per-process table check -------------------------------------------------------------


def test_create_table_is_not_skipped_for_another_region(harness: DynamoDBHarness) -> None:
    name = new_table_name()
    opts = harness.options
    east = open_client(opts, opts.endpoint_url)
    west_opts = type(opts)(**{**opts.__dict__, "region": "eu-west-1"})
    west = open_client(west_opts, west_opts.endpoint_url)
    try:
        DynamoDBStore(name, client=east, create_table=True).close()
        store = DynamoDBStore(name, client=west, create_table=True)
        store.commit(Execution(id="w1", definition_id="d"), [])
        assert west.describe_table(TableName=name)["Table"]["TableStatus"] == "ACTIVE"
        store.close()
    finally:
        for client in (east, west):
            with contextlib.suppress(ClientError):
                client.delete_table(TableName=name)
            client.close()


# -- commit tokens and CommitOutcomeUnknown --------------------------------------------------


def test_an_unanswered_commit_raises_outcome_unknown_and_its_resend_settles(
    faulty_store: tuple[DynamoDBStore, DynamoDBStore, Faulty],
) -> None:
    store, other, faulty = faulty_store
    mine = started(store, "u1")
    args = [(None, Event(id="once", kind="Go"))]
    faulty.faults = [lost_after_landing] + [never_answered] * 20
    with pytest.raises(CommitOutcomeUnknown) as info:
        store.commit(mine, args)
    assert info.value.execution_id == "u1" and info.value.expected == 1
    assert mine.version == 1
    faulty.faults = []
    store.commit(mine, args)  # the same commit again: recognised by its token
    assert mine.version == 2
    stored = other.load("u1")
    assert stored is not None and stored.version == 2
    assert [e.event.id for e in other.pending_outbox()] == ["once"]


def test_the_receipt_is_the_core_commit_token(
    faulty_store: tuple[DynamoDBStore, DynamoDBStore, Faulty], harness: DynamoDBHarness
) -> None:
    store, _other, _faulty = faulty_store
    mine = started(store, "u2")
    tokens: list[str] = []
    real = store._plan.commit

    def spy(prepared: Any, trace_max: int | None) -> Any:
        tokens.append(prepared.token)
        return real(prepared, trace_max)

    store._plan.commit = spy  # type: ignore[method-assign]
    store.commit(mine, [])
    item = harness.scan()
    stored = next(i for i in item if i["pk"]["S"] == "x:u2" and i["sk"]["S"] == "x")
    assert stored["k2"] == {"S": tokens[0]}


def test_a_changed_resend_is_still_a_conflict(
    faulty_store: tuple[DynamoDBStore, DynamoDBStore, Faulty],
) -> None:
    store, _other, _faulty = faulty_store
    mine = started(store, "u3")
    store.commit(mine, [(None, Event(id="a", kind="Go"))])
    mine.version = 1
    with pytest.raises(StoreConflict):
        store.commit(mine, [(None, Event(id="b", kind="Go"))])


# -- the reference implementation's forms ----------------------------------------------------


def test_the_client_positional_form_opens_the_prefix_table(harness: DynamoDBHarness) -> None:
    client = open_client(harness.options, harness.options.endpoint_url)
    try:
        store = DynamoDBStore(client, prefix=harness.table)  # created when missing
        store.commit(Execution(id="p1", definition_id="d"), [])
        assert store.options.table == harness.table
        assert store.load("p1") is not None
        store.close()
        assert client.get_item(TableName=harness.table, Key=META_KEY)["Item"]
    finally:
        client.close()


def test_sync_create_is_the_reference_factory(harness: DynamoDBHarness) -> None:
    opts = harness.options
    store = DynamoDBStore.create(
        endpoint_url=opts.endpoint_url, region=opts.region_name, prefix=harness.table
    )
    try:
        store.commit(Execution(id="c1", definition_id="d"), [])
        assert store.load("c1") is not None
    finally:
        store.close()


@pytest.mark.anyio
async def test_async_create_is_the_reference_factory(harness: DynamoDBHarness) -> None:
    opts = harness.options
    store = await AsyncDynamoDBStore.create(
        endpoint_url=opts.endpoint_url, region=opts.region_name, prefix=harness.table
    )
    try:
        await store.commit(Execution(id="c2", definition_id="d"), [])
        assert await store.load("c2") is not None
    finally:
        await store.close()


def test_a_traced_resend_through_a_cold_store_is_recognised_by_its_cursor_read(
    harness: DynamoDBHarness,
) -> None:
    first = harness.open_sync()
    mine = started(first, "u4")
    args = {"emits": [(None, Event(id="traced", kind="Go"))], "trace": {"event": "Go"}}
    first.commit(mine, **args)
    cold = harness.open_sync()  # never saw u4: reads the cursor (and the receipt) first
    mine.version = 1
    cold.commit(mine, **args)
    assert mine.version == 2
    assert [e.event.id for e in cold.pending_outbox()] == ["traced"]
    assert len(cold.read_trace("u4")) == 1
