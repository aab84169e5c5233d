"""Issue 9: a commit that raises was never applied, a commit that returns was applied once.

The races behind the reliability finding, made deterministic at the client level against the
moto server: the first send of a commit lands but its answer is lost (a timeout) or refused by
a hidden botocore retry, and meanwhile another writer commits on top; or the send times out
while the server still holds it and applies it later.  The store must report the truth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import (  # type: ignore[import-untyped, unused-ignore]
    ClientError,
    ReadTimeoutError,
)
from harel.model import Event, Execution
from harel.store.contract import StoreConflict
from harel.store.errors import StoreUnavailable
from harel_store_dynamodb import DynamoDBStore
from harel_store_dynamodb.sync import open_client
from harel_store_dynamodb.testing import DynamoDBHarness

WRITES = ("transact_write_items", "update_item")


Fault = Callable[[Callable[[], Any]], Any]


class Faulty:
    """A boto3 client whose next writes go through ``faults``, one each, in order."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.faults: list[Fault] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if name not in WRITES:
            return method

        def call(**params: Any) -> Any:
            if not self.faults:
                return method(**params)
            return self.faults.pop(0)(lambda: method(**params))

        return call


def timeout() -> ReadTimeoutError:
    return ReadTimeoutError(endpoint_url="http://moto")


@pytest.fixture
def pair(dynamodb_target: dict[str, Any]) -> Iterator[tuple[DynamoDBStore, DynamoDBStore, Faulty]]:
    """A store over a faulty client, and a second, healthy store over the same table."""
    harness = DynamoDBHarness(**dynamodb_target)
    raw = open_client(harness.options, harness.options.endpoint_url)
    faulty = Faulty(raw)
    store = DynamoDBStore(harness.table, client=faulty, create_table=True, max_attempts=1)
    other = harness.open_sync()
    yield store, other, faulty
    store.close()
    raw.close()
    harness.destroy()


def emit(tag: str) -> list[tuple[str | None, Event]]:
    return [(None, Event(id=tag, kind="Raced"))]


def commit_on_top(other: DynamoDBStore, execution_id: str, tag: str) -> None:
    exe = other.load(execution_id)
    assert exe is not None
    other.commit(exe, emit(tag))


def started(store: DynamoDBStore, execution_id: str) -> Execution:
    """A new execution stored at version 1, as loaded back."""
    store.commit(Execution(id=execution_id, definition_id="d"), [])
    mine = store.load(execution_id)
    assert mine is not None
    return mine


def pending(store: DynamoDBStore) -> list[str]:
    return sorted(entry.event.id for entry in store.pending_outbox())


def lost_after_landing(other: DynamoDBStore) -> Fault:
    """Our write lands, another writer commits on top, and our answer never arrives."""

    def fault(send: Callable[[], Any]) -> Any:
        send()
        commit_on_top(other, "x1", "theirs")
        raise timeout()

    return fault


def refused_by_a_hidden_retry(other: DynamoDBStore) -> Fault:
    """botocore's first send lands, its answer is lost, its retry is refused by the condition
    (another writer committed on top meanwhile)."""

    def fault(send: Callable[[], Any]) -> Any:
        send()
        commit_on_top(other, "x1", "theirs")
        try:
            send()
        except ClientError as exc:
            exc.response.setdefault("ResponseMetadata", {})["RetryAttempts"] = 1
            raise
        raise AssertionError("the resend should have been refused")

    return fault


@pytest.mark.parametrize("fault", [lost_after_landing, refused_by_a_hidden_retry])
@pytest.mark.parametrize("emits", [False, True], ids=["update_item", "transaction"])
def test_a_commit_that_landed_is_reported_as_stored_whatever_its_answer(
    pair: tuple[DynamoDBStore, DynamoDBStore, Faulty],
    fault: Callable[[DynamoDBStore], Fault],
    emits: bool,
) -> None:
    store, other, faulty = pair
    mine = started(store, "x1")
    faulty.faults = [fault(other)]
    store.commit(mine, emit("mine") if emits else [])  # must not raise: it was stored
    assert mine.version == 2
    stored = other.load("x1")
    assert stored is not None and stored.version == 3
    assert pending(other) == (["mine", "theirs"] if emits else ["theirs"])


def test_a_send_applied_after_the_client_gave_up_is_reported_as_stored(
    pair: tuple[DynamoDBStore, DynamoDBStore, Faulty],
) -> None:
    store, other, faulty = pair
    mine = started(store, "x3")
    late: list[Callable[[], Any]] = []

    def stalled(send: Callable[[], Any]) -> Any:
        late.append(send)  # the server holds the request; the client times out
        raise timeout()

    def resend(send: Callable[[], Any]) -> Any:
        late.pop()()  # the stalled original lands first, then the resend arrives
        return send()

    faulty.faults = [stalled, resend]
    store.commit(mine, emit("mine"))
    assert mine.version == 2
    stored = other.load("x3")
    assert stored is not None and stored.version == 2
    assert pending(other) == ["mine"]


def test_a_lost_answer_of_a_write_that_did_not_land_is_a_conflict(
    pair: tuple[DynamoDBStore, DynamoDBStore, Faulty],
) -> None:
    store, other, faulty = pair
    mine = started(store, "x4")

    def lost_before(send: Callable[[], Any]) -> Any:
        commit_on_top(other, "x4", "theirs")  # someone else wins first; ours never arrives
        raise timeout()

    faulty.faults = [lost_before]
    with pytest.raises(StoreConflict) as info:
        store.commit(mine, emit("mine"))
    assert info.value.found == 2
    assert mine.version == 1
    assert pending(other) == ["theirs"]


def enqueued_on_top(other: DynamoDBStore) -> Fault:
    """Our enqueue lands, another writer enqueues to the same target (moving its work row),
    and our answer never arrives."""

    def fault(send: Callable[[], Any]) -> Any:
        send()
        other.enqueue("q1", Event(id="theirs", kind="Raced"))
        raise timeout()

    return fault


def retried_on_top(other: DynamoDBStore) -> Fault:
    """botocore's first send of our enqueue lands, its answer is lost, and its retry (after
    another writer touched the target's row) is refused by the conditions."""

    def fault(send: Callable[[], Any]) -> Any:
        send()
        other.enqueue("q1", Event(id="theirs", kind="Raced"), priority=4)
        try:
            send()
        except ClientError as exc:
            exc.response.setdefault("ResponseMetadata", {})["RetryAttempts"] = 1
            raise
        return None  # the server answered the duplicate request as the original

    return fault


@pytest.mark.parametrize("fault", [enqueued_on_top, retried_on_top])
def test_an_enqueue_that_landed_returns_its_seq_once_whatever_its_answer(
    pair: tuple[DynamoDBStore, DynamoDBStore, Faulty], fault: Callable[[DynamoDBStore], Fault]
) -> None:
    store, other, faulty = pair
    faulty.faults = [fault(other)]
    seq = store.enqueue("q1", Event(id="mine", kind="Raced"))
    entries = other.pending_outbox()
    assert sorted(e.event.id for e in entries) == ["mine", "theirs"], "stored once"
    assert next(e.seq for e in entries if e.event.id == "mine") == seq
    (claim,) = other.claim("w1", 1e12)
    assert claim.execution_id == "q1" and claim.units == 2


def test_an_enqueue_whose_sends_all_go_unanswered_is_unavailable(
    pair: tuple[DynamoDBStore, DynamoDBStore, Faulty],
) -> None:
    store, other, faulty = pair

    def lost(send: Callable[[], Any]) -> Any:
        raise timeout()

    faulty.faults = [lost] * 50
    with pytest.raises(StoreUnavailable):
        store.enqueue("q2", Event(id="mine", kind="Raced"))
    faulty.faults = []
    assert other.pending_outbox() == []
