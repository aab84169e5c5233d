"""Issue 17 on MongoDB: commits whose reply or request is lost answer the truth (the harness's
driver hook plays the network faults mongomock cannot have), dedupe marks keep the document
bounded, the 16 MiB BSON limit is enforced, correctness-critical driver options are pinned and
servers/indexes the store cannot work with are refused at open."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import bson
import pymongo
import pytest
from harel.model import Event, Execution
from harel.store.errors import (
    CommitOutcomeUnknown,
    PayloadTooLarge,
    StoreConfigError,
    StoreConflict,
    StoreUnavailable,
)
from harel_store_mongo import AsyncMongoStore, MongoStore
from harel_store_mongo._base import MongoStoreBase
from harel_store_mongo._options import make_options
from harel_store_mongo._schema import EXECUTIONS, MARKS, MARKS_HIGH, META
from harel_store_mongo.testing import Fault, MongomockHarness
from pymongo import ReadPreference
from pymongo.errors import ServerSelectionTimeoutError

pytestmark = pytest.mark.anyio


@pytest.fixture
def mock() -> Iterator[MongomockHarness]:
    """These tests drive mongomock's fault hook: always the in-process dataset."""
    harness = MongomockHarness()
    yield harness
    harness.destroy()


def new_exe(execution_id: str) -> Execution:
    return Execution(id=execution_id, definition_id="flow", context={"n": 0})


def args(tag: str) -> dict[str, Any]:
    return {"emits": [(None, Event(id=f"out-{tag}", kind="k"))], "processed_event_id": f"in-{tag}"}


def doc_of(harness: MongomockHarness, execution_id: str) -> dict[str, Any]:
    doc: dict[str, Any] | None = harness.database()[EXECUTIONS].find_one({"_id": execution_id})
    assert doc is not None
    return doc


def rival_commit(harness: MongomockHarness, execution_id: str) -> Callable[[], None]:
    """Another writer's commit (its own store) that the fault runs before the store resends."""

    def run() -> None:
        rival = harness.open_sync()
        try:
            other = rival.load(execution_id)
            assert other is not None
            other.context = {"by": "rival"}
            rival.commit(other, [(None, Event(id="out-rival", kind="k"))])
        finally:
            rival.close()

    return run


class Flavour:
    """The sync or the async store behind one awaitable interface."""

    def __init__(self, harness: MongomockHarness, is_async: bool) -> None:
        self.harness, self.is_async = harness, is_async
        self.store: Any = None

    async def __aenter__(self) -> Flavour:
        self.store = await self.harness.open_async() if self.is_async else self.harness.open_sync()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.is_async:
            await self.store.close()
        else:
            self.store.close()

    async def commit(self, exe: Execution, **kwargs: Any) -> None:
        result = self.store.commit(exe, **kwargs)
        if self.is_async:
            await result

    async def outbox(self) -> list[str]:
        result = self.store.pending_outbox()
        entries = await result if self.is_async else result
        return [entry.event.id for entry in entries]


FLAVOURS = pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])


# -- lost replies and lost requests ---------------------------------------------------------------


@FLAVOURS
async def test_a_lost_reply_with_a_rival_commit_answers_stored(
    mock: MongomockHarness, is_async: bool
) -> None:
    """The write lands, its reply is lost, a rival commits before the resend: the store must
    answer success (the step IS stored), never StoreConflict (the caller would apply it
    twice)."""
    async with Flavour(mock, is_async) as f:
        exe = new_exe("lr-1")
        await f.commit(exe, emits=[])
        fault = mock.inject(Fault("lost_reply", rival=rival_commit(mock, "lr-1")))
        await f.commit(exe, **args("a"))
        assert fault.seen == ["find_one_and_update"]
        assert exe.version == 2
        assert doc_of(mock, "lr-1")["version"] == 3  # the rival's commit came after ours
        assert await f.outbox() == ["out-a", "out-rival"]  # ours exactly once


@FLAVOURS
async def test_a_lost_request_with_a_rival_commit_is_a_conflict(
    mock: MongomockHarness, is_async: bool
) -> None:
    async with Flavour(mock, is_async) as f:
        exe = new_exe("lr-2")
        await f.commit(exe, emits=[])
        mock.inject(Fault("lost_request", rival=rival_commit(mock, "lr-2")))
        with pytest.raises(StoreConflict):
            await f.commit(exe, **args("a"))
        assert exe.version == 1
        assert await f.outbox() == ["out-rival"]


@FLAVOURS
async def test_a_lost_request_alone_is_resent_and_stored_once(
    mock: MongomockHarness, is_async: bool
) -> None:
    async with Flavour(mock, is_async) as f:
        exe = new_exe("lr-3")
        await f.commit(exe, emits=[])
        mock.inject(Fault("lost_request"))
        await f.commit(exe, **args("a"))
        assert exe.version == 2 and doc_of(mock, "lr-3")["version"] == 2
        assert await f.outbox() == ["out-a"]


@FLAVOURS
async def test_two_lost_replies_say_unknown_and_the_callers_resend_settles_it(
    mock: MongomockHarness, is_async: bool
) -> None:
    async with Flavour(mock, is_async) as f:
        exe = new_exe("lr-4")
        await f.commit(exe, emits=[])
        mock.inject(Fault("lost_reply", times=2))
        with pytest.raises(CommitOutcomeUnknown):
            await f.commit(exe, **args("a"))
        assert exe.version == 1
        await f.commit(exe, **args("a"))  # the same commit, re-sent as the error says
        assert exe.version == 2 and doc_of(mock, "lr-4")["version"] == 2
        assert await f.outbox() == ["out-a"]


@FLAVOURS
async def test_an_insert_whose_reply_is_lost_is_recognised(
    mock: MongomockHarness, is_async: bool
) -> None:
    async with Flavour(mock, is_async) as f:
        exe = new_exe("lr-5")
        mock.inject(Fault("lost_reply"))
        await f.commit(exe, **args("a"))
        assert exe.version == 1 and await f.outbox() == ["out-a"]


@FLAVOURS
async def test_no_server_selected_is_unavailable_with_nothing_written(
    mock: MongomockHarness, is_async: bool
) -> None:
    async with Flavour(mock, is_async) as f:
        exe = new_exe("lr-6")
        await f.commit(exe, emits=[])
        fault = mock.inject(Fault("lost_request", error=ServerSelectionTimeoutError))
        with pytest.raises(StoreUnavailable) as info:
            await f.commit(exe, **args("a"))
        assert not isinstance(info.value, CommitOutcomeUnknown)
        assert fault.seen == ["find_one_and_update"]  # not re-sent
        assert exe.version == 1 and await f.outbox() == []


# -- dedupe marks stay bounded --------------------------------------------------------------------


def test_a_long_run_of_marked_events_keeps_the_document_bounded(mock: MongomockHarness) -> None:
    """A timer loop marks one event per commit forever: the document keeps at most
    MARKS_HIGH marks (older ones move to ``marks``) and every mark still deduplicates."""
    store = mock.open_sync()
    try:
        exe = new_exe("loop")
        total = 5 * MARKS_HIGH  # several moves out of the document
        largest = 0
        for n in range(total):
            store.commit(exe, [], processed_event_id=f"tick-{n:05d}")
            if n % 97 == 0:
                doc = doc_of(mock, "loop")
                assert len(doc["processed"]) <= MARKS_HIGH
                largest = max(largest, len(bson.encode(doc)))
        doc = doc_of(mock, "loop")
        assert len(doc["processed"]) <= MARKS_HIGH and doc["marks_out"] is True
        assert largest < 32 * 1024, f"the document grew to {largest} bytes"
        moved = mock.database()[MARKS].count_documents({"e": "loop"})
        assert moved + len(doc["processed"]) == total
        for n in (0, 1, total // 2, total - 1):
            assert store.is_processed("loop", f"tick-{n:05d}")
            loaded, seen = store.load_for_event("loop", f"tick-{n:05d}")
            assert loaded is not None and seen
        assert not store.is_processed("loop", "tick-never")
        record = store.export_execution("loop")
        assert record is not None and len(record.processed) == total
        assert store.prune_processed(1e18, batch_size=700) == total
        assert not store.is_processed("loop", "tick-00000")
        assert mock.database()[MARKS].count_documents({}) == 0
    finally:
        store.close()


def test_purge_removes_the_moved_marks(mock: MongomockHarness) -> None:
    store = mock.open_sync()
    try:
        exe = new_exe("gone")
        for n in range(MARKS_HIGH + 1):
            store.commit(exe, [], processed_event_id=f"e-{n}")
        assert mock.database()[MARKS].count_documents({"e": "gone"}) > 0
        assert "processed:e-0" in mock.footprint("gone")
        store.purge("gone", force=True)
        assert mock.database()[MARKS].count_documents({}) == 0
        assert mock.footprint("gone") == []
    finally:
        store.close()


# -- the 16 MiB limit ----------------------------------------------------------------------------


def test_the_harness_refuses_a_document_over_16_mib_and_keeps_the_old_one(
    mock: MongomockHarness,
) -> None:
    """mongomock stores any size; the harness refuses what a server refuses (nothing
    written), and the store reports PayloadTooLarge."""
    store = MongoStore(mock.sync_client(), db=mock.db, trace_max=None)
    try:
        exe = new_exe("big")
        chunk = "x" * (5 * 1024 * 1024)
        for _ in range(3):
            store.commit(exe, [], trace={"blob": chunk})
        before = doc_of(mock, "big")
        with pytest.raises(PayloadTooLarge):
            store.commit(exe, [], trace={"blob": chunk})
        assert exe.version == 3
        assert doc_of(mock, "big") == before
    finally:
        store.close()


def test_the_commit_estimate_counts_utf8_bytes(mock: MongomockHarness) -> None:
    """9 Mi two-byte characters are 18 MiB of BSON: refused before anything is sent."""
    store = mock.open_sync()
    try:
        exe = new_exe("utf8")
        store.commit(exe, [])
        exe.context = {"text": "\u00e9" * (9 * 1024 * 1024)}
        with mock.counting() as calls, pytest.raises(PayloadTooLarge, match="bytes"):
            store.commit(exe, [])
        assert calls == [] and exe.version == 1
    finally:
        store.close()


# -- pinned driver options ------------------------------------------------------------------------

SECONDARY_URL = "mongodb://db.invalid/?readPreference=secondaryPreferred&w=1&journal=true"


def test_reads_go_to_the_primary_and_writes_wait_for_a_majority() -> None:
    """Whatever the client says: primary reads; w: majority unless told (j kept)."""
    client: Any = pymongo.MongoClient(SECONDARY_URL, connect=False)
    try:
        store = MongoStoreBase(client)
        database = store._database
        assert database.read_preference == ReadPreference.PRIMARY
        assert database.write_concern.document == {"w": "majority", "j": True}
        collection = database.get_collection(EXECUTIONS)
        assert collection.read_preference == ReadPreference.PRIMARY
        assert collection.write_concern.document == {"w": "majority", "j": True}
        kept = MongoStoreBase(client, w=None)._database
        assert kept.read_preference == ReadPreference.PRIMARY
        assert kept.write_concern.document == {"w": 1, "j": True}
        assert MongoStoreBase(client, w=2)._database.write_concern.document["w"] == 2
        assert MongoStoreBase(client, w="2")._database.write_concern.document["w"] == 2
        with pytest.raises(ValueError, match="w=0"):
            MongoStoreBase(client, w=0)
    finally:
        client.close()


def test_the_async_client_gets_the_same_pins() -> None:
    client: Any = pymongo.AsyncMongoClient(SECONDARY_URL, connect=False)
    database = MongoStoreBase(client)._database
    assert database.read_preference == ReadPreference.PRIMARY
    assert database.write_concern.document == {"w": "majority", "j": True}


def test_a_url_write_concern_overrides_the_default() -> None:
    options = make_options("mongodb://h/?w=1&journal=true")
    assert options.store_kwargs()["w"] == "1" and "w=" not in options.driver_uri
    client: Any = pymongo.MongoClient(options.driver_uri, connect=False)
    try:
        database = MongoStoreBase(client, **options.store_kwargs())._database
        assert database.write_concern.document == {"w": 1, "j": True}  # the client's j kept
    finally:
        client.close()
    options = make_options("mongodb://h/?readPreference=secondary")
    assert options.store_kwargs()["w"] == "majority"  # the default
    assert make_options("mongodb://h/?w=none").store_kwargs()["w"] is None  # the client's


def test_the_injected_client_receives_the_pins(mock: MongomockHarness) -> None:
    client = mock.sync_client()
    MongoStore(client, db=mock.db).close()
    assert client.database_kwargs["read_preference"] == ReadPreference.PRIMARY
    assert client.database_kwargs["write_concern"].document == {"w": "majority"}


# -- refused at open ------------------------------------------------------------------------------


def test_a_server_older_than_4_2_is_refused_before_anything_is_written() -> None:
    harness = MongomockHarness(server_version="4.0.28")
    with pytest.raises(StoreConfigError, match=r"MongoDB 4\.0\.28.*4\.2 or newer"):
        harness.open_sync()
    assert harness.database()[META].count_documents({}) == 0


async def test_the_async_store_refuses_an_old_server_too() -> None:
    harness = MongomockHarness(server_version="3.6.8")
    with pytest.raises(StoreConfigError, match=r"4\.2 or newer"):
        await harness.open_async()


def test_an_index_of_the_same_keys_under_another_name_is_refused(mock: MongomockHarness) -> None:
    mock.database()[EXECUTIONS].create_index([("outbox_next", 1)], name="by_outbox")
    with pytest.raises(StoreConfigError, match="by_outbox") as info:
        mock.open_sync()
    assert "dropIndex" in str(info.value) and "'outbox_next'" in str(info.value)
    assert mock.database()[META].count_documents({}) == 0


async def test_an_index_of_another_shape_under_our_name_is_refused(mock: MongomockHarness) -> None:
    mock.database()[MARKS].create_index([("at", -1)], name="marks_at")
    with pytest.raises(StoreConfigError, match="marks_at"):
        await AsyncMongoStore.open(mock.async_client(), db=mock.db)
