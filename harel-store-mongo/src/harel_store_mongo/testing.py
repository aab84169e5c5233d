"""Conformance-kit support: a fresh database per harness, on mongomock or on a real server.

* :class:`MongomockHarness` — no MongoDB server can be installed on the test machines, so the
  tests inject mongomock (sync) and mongomock-motor (async) clients over one in-process
  dataset.  mongomock applies an operation in several Python steps, so the harness runs each
  driver call under one lock — the per-operation atomicity a server gives — and counts the
  calls (mongomock has no wire to count on).  It also plays the server where mongomock does
  not: a write that leaves a document over 16 MiB of BSON is undone and refused (code 17419,
  as a server refuses it), ``buildInfo`` reports :attr:`MongomockHarness.server_version`, and
  :meth:`MongomockHarness.inject` breaks the next matching call the way a network does (a
  lost reply: the write is applied, then ``AutoReconnect``; a lost request: ``AutoReconnect``
  and nothing applied), optionally running a rival writer in between (the kit's TCP
  :class:`~harel.conformance.proxy.FaultProxy` cannot sit in front of an in-process dataset).
  The data lives in this process only: :meth:`~MongomockHarness.url` is ``None`` and the
  harness declares neither ``persistent`` nor ``multi_process`` (the store classes keep the
  real server's capabilities).
* :class:`MongoServerHarness` — ``HAREL_TEST_MONGO_URL`` (or ``harel conformance
  mongodb://...``): a new random database on that server, dropped by :meth:`destroy`; driver
  calls are counted with PyMongo's command monitoring (real round trips, ``getMore``
  included), and the kit verifies ``persistent`` / ``multi_process`` through :meth:`url`.

``harness_from_url`` picks one: the reserved host ``mongomock.invalid``
(``harel conformance mongodb://mongomock.invalid/``) means mongomock, anything else a real
server.
"""

from __future__ import annotations

import inspect
import threading
import uuid
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import quote

import bson
from harel.conformance.harness import RawSide, RawSideCommit, StoreHarness
from harel.store.author import current_library, needs_harel_testing
from harel.store.contract import Capabilities
from pymongo import monitoring
from pymongo.errors import AutoReconnect, OperationFailure
from pymongo.results import BulkWriteResult

from harel_store_mongo._errors import translate
from harel_store_mongo._legacy import with_db
from harel_store_mongo._options import make_options
from harel_store_mongo._requests import Request
from harel_store_mongo._schema import EXECUTIONS, MARKS
from harel_store_mongo._spec import CAPABILITIES
from harel_store_mongo.aio import AsyncMongoStore
from harel_store_mongo.sync import MongoStore

MOCK_HOST = "mongomock.invalid"
BSON_LIMIT = 16 * 1024 * 1024
"""MongoDB's largest document (BSON bytes); mongomock enforces none."""
DOCUMENT_WRITES = frozenset({"update_one", "find_one_and_update"})
"""The calls after which the mongomock harness checks the written document's BSON size."""
DEFAULT_SERVER_VERSION = "7.0.0"
CURSOR_METHODS = frozenset({"find", "aggregate", "list_indexes"})
IGNORED_COMMANDS = frozenset(
    {"hello", "ismaster", "isMaster", "endSessions", "saslStart", "saslContinue", "killCursors"}
)
"""Commands the driver sends on its own (handshakes, monitoring, session and cursor cleanup)."""


def footprint(database: Any, execution_id: str) -> list[str]:
    """Every record the database holds for ``execution_id``, one label each, read directly."""
    executions = database.get_collection(EXECUTIONS)
    labels: list[str] = []
    doc = executions.find_one({"_id": execution_id})
    if doc is not None and doc.get("version", 0) >= 1:
        labels.append("execution")
        labels += [f"processed:{mark['event']}" for mark in doc.get("processed") or []]
        moved = database.get_collection(MARKS).find({"e": execution_id}, {"_id": 1})
        labels += sorted({f"processed:{mark['_id']['ev']}" for mark in moved} - set(labels))
        labels += [f"timer:{timer['path']}" for timer in doc.get("timers") or []]
        labels += [f"spawn:{spawn['seq']}" for spawn in doc.get("spawns") or []]
        ring = doc.get("trace") or []
        first = doc.get("trace_next", 0) - len(ring)
        labels += [f"trace:{first + j}" for j in range(len(ring))]
    for holder in executions.find({"outbox.target": execution_id}, {"outbox": 1}):
        labels += [
            f"outbox:{entry['seq']}"
            for entry in holder.get("outbox") or []
            if entry.get("target") == execution_id
        ]
    return labels


def raw_commit(client: Any, db: str) -> Callable[[str, int, str], None]:
    """The benchmarks' raw write over ``client``: one ``update_one`` CAS of the document."""
    executions = client.get_database(db).get_collection(EXECUTIONS)

    def write(execution_id: str, version: int, document: str) -> None:
        done = executions.update_one(
            {"_id": execution_id, "version": version},
            {"$set": {"data": document, "version": version + 1}},
        )
        if done.modified_count != 1:
            raise RuntimeError(f"raw write: {execution_id!r} is not at version {version}")

    return write


def raw_side_commit(client: Any, db: str) -> RawSideCommit:
    """The benchmarks' raw side commit over ``client``: ONE ``update_one`` CAS of the
    document that also pushes the outbox entry, the dedupe mark and the trace step into their
    arrays and sets the timer (the bench's execution has that one timer path, so the upsert
    is a ``$set`` of the array); no seqs, no ring trimming, no sweep keys."""
    executions = client.get_database(db).get_collection(EXECUTIONS)

    def write(execution_id: str, version: int, document: str, side: RawSide) -> None:
        done = executions.update_one(
            {"_id": execution_id, "version": version},
            {
                "$set": {
                    "data": document,
                    "version": version + 1,
                    "timers": [{"path": side.timer_path, "at": side.fire_at}],
                },
                "$push": {
                    "outbox": {"seq": side.trace_index, "target": execution_id, "event": side.emit},
                    "processed": {"event": side.event_id, "at": side.now},
                    "trace": side.trace,
                },
                "$inc": {"trace_next": 1},
            },
        )
        if done.modified_count != 1:
            raise RuntimeError(f"raw write: {execution_id!r} is not at version {version}")

    return write


# -- mongomock: one lock, counted calls ---------------------------------------------------------


@dataclass
class Fault:
    """A network failure :meth:`MongomockHarness.inject` plays on the next matching call.

    ``lost_reply``: the call is applied, then ``error`` is raised (the reply never came back);
    ``lost_request``: ``error`` is raised and nothing is applied.  ``rival`` runs in between
    (after the write of a lost reply, instead of the write of a lost request) — another
    writer's commit before the store can resend.  ``times``: how many matching calls fail.
    """

    kind: Literal["lost_reply", "lost_request"] = "lost_reply"
    methods: frozenset[str] = DOCUMENT_WRITES
    collection: str = EXECUTIONS
    rival: Callable[[], None] | None = None
    error: Callable[[str], Exception] = AutoReconnect
    times: int = 1
    seen: list[str] = field(default_factory=list)
    """The methods it broke, in order."""


WRITE_METHODS = frozenset(
    {
        "update_one",
        "update_many",
        "find_one_and_update",
        "delete_one",
        "delete_many",
        "insert_one",
        "insert_many",
        "bulk_write",
    }
)
ANY_DOCUMENT = "*"
"""The id :func:`filter_ids` gives a filter that does not name its documents by ``_id``."""


def filter_ids(query: Any) -> tuple[Any, ...]:
    """The ``_id`` values a write's filter confines it to (``_id: v``, ``_id: {$in: [...]}``,
    ``$or`` of such); ``(ANY_DOCUMENT,)`` when it names none (it may write any document)."""
    if not isinstance(query, dict):
        return (ANY_DOCUMENT,)
    if "_id" in query:
        key = query["_id"]
        if isinstance(key, dict) and set(key) == {"$in"}:
            return tuple(key["$in"])
        if isinstance(key, dict) and set(key) == {"$eq"}:
            return (key["$eq"],)
        return (key,)
    branches = query.get("$or")
    if isinstance(branches, list) and branches:
        ids = tuple(i for branch in branches for i in filter_ids(branch))
        if ANY_DOCUMENT not in ids:
            return ids
    return (ANY_DOCUMENT,)


def written_ids(method: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The documents one write call may write (by ``_id``), from its driver arguments."""
    if method == "insert_one" and args:
        return (args[0].get("_id", ANY_DOCUMENT),)
    if method == "insert_many" and args:
        return tuple(doc.get("_id", ANY_DOCUMENT) for doc in args[0])
    if method == "bulk_write" and args:
        return tuple(i for op in args[0] for i in filter_ids(getattr(op, "_filter", None)))
    return filter_ids(args[0] if args else None)


class CallLog:
    """The driver calls made through a harness (``(collection, method)``), the documents each
    write may have written (``(collection, method, ids)``: :func:`written_ids`), the lock
    that makes each call atomic, and the faults still to play."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.calls: list[tuple[str, str]] = []
        self.writes: list[tuple[str, str, tuple[Any, ...]]] = []
        self.faults: list[Fault] = []

    def fault_for(self, collection: str, method: str) -> Fault | None:
        """The fault to play on this call (``None``: none); counts it as played."""
        for fault in self.faults:
            if fault.times > 0 and fault.collection == collection and method in fault.methods:
                fault.times -= 1
                fault.seen.append(method)
                return fault
        return None

    @contextmanager
    def counting(self) -> Iterator[list[tuple[str, str]]]:
        """The calls made inside the block."""
        start = len(self.calls)
        seen: list[tuple[str, str]] = []
        try:
            yield seen
        finally:
            seen.extend(self.calls[start:])

    @contextmanager
    def writing(self) -> Iterator[list[tuple[str, str, tuple[Any, ...]]]]:
        """The writes made inside the block: ``(collection, method, ids)``."""
        start = len(self.writes)
        seen: list[tuple[str, str, tuple[Any, ...]]] = []
        try:
            yield seen
        finally:
            seen.extend(self.writes[start:])


class _ListCursor:
    """A drained cursor for the async driver."""

    def __init__(self, docs: list[Any]) -> None:
        self.docs = docs

    def __iter__(self) -> Iterator[Any]:
        return iter(self.docs)

    async def to_list(self, length: int | None = None) -> list[Any]:
        return self.docs if length is None else self.docs[:length]


def _bulk_result(results: list[Any]) -> BulkWriteResult:
    """The ``BulkWriteResult`` a server answers for these ``update_one`` results (the plan
    reads ``upserted_ids``: which rows a touch inserted)."""
    upserted = [
        {"index": index, "_id": result.upserted_id}
        for index, result in enumerate(results)
        if result.upserted_id is not None
    ]
    matched = sum(result.matched_count for result in results)
    modified = sum(result.modified_count or 0 for result in results)
    return BulkWriteResult(
        {
            "nInserted": 0,
            "nUpserted": len(upserted),
            "nMatched": matched,
            "nModified": modified,
            "nRemoved": 0,
            "upserted": upserted,
            "writeErrors": [],
            "writeConcernErrors": [],
        },
        True,
    )


class _LockedCollection:
    def __init__(
        self, inner: Any, name: str, log: CallLog, is_async: bool, raw: Any = None
    ) -> None:
        self._inner, self._name, self._log, self._async = inner, name, log, is_async
        self._raw = raw
        """The sync mongomock collection underneath (the BSON-size check reads and restores
        documents through it)."""

    def _record(self, method: str, args: tuple[Any, ...] = ()) -> None:
        self._log.calls.append((self._name, method))
        if method in WRITE_METHODS:
            self._log.writes.append((self._name, method, written_ids(method, args)))

    def _before(self, method: str, args: tuple[Any, ...]) -> tuple[Any, Any] | None:
        """``(_id, the document before the write)`` of a single-document write by ``_id``."""
        if self._raw is None or method not in DOCUMENT_WRITES or not args:
            return None
        key = args[0].get("_id") if isinstance(args[0], dict) else None
        if not isinstance(key, str):
            return None
        return key, self._raw.find_one({"_id": key})  # mongomock returns a copy

    def _check_size(self, before: tuple[Any, Any] | None) -> None:
        """Undo and refuse a write that left its document over 16 MiB of BSON, as a server
        refuses it (nothing written)."""
        if before is None:
            return
        key, old = before
        new = self._raw.find_one({"_id": key})
        if new is None or len(bson.encode(new)) <= BSON_LIMIT:
            return
        if old is None:
            self._raw.delete_one({"_id": key})
        else:
            self._raw.replace_one({"_id": key}, old)
        raise OperationFailure(
            f"Resulting document after update is larger than {BSON_LIMIT}", code=17419
        )

    def _play(self, method: str, apply: Callable[[], Any]) -> Any:
        """Run one call (under the lock), playing a pending fault on it."""
        fault = self._log.fault_for(self._name, method)
        if fault is None:
            return apply()
        if fault.kind == "lost_reply":
            apply()
        if fault.rival is not None:
            fault.rival()
        raise fault.error(f"connection closed ({fault.kind} injected by the test harness)")

    def _bulk_write(self, requests: list[Any], ordered: bool = True) -> Any:
        """``bulk_write`` of upserting ``UpdateOne`` operations, one ``update_one`` each
        (mongomock's own fails on PyMongo's ``UpdateOne``, which carries a ``sort``); a
        server's bulk write is not atomic across documents either."""
        done = [self._inner.update_one(op._filter, op._doc, upsert=op._upsert) for op in requests]
        if not self._async:
            return _bulk_result(done)

        async def settle() -> BulkWriteResult:
            return _bulk_result([await r if inspect.isawaitable(r) else r for r in done])

        return settle()

    def __getattr__(self, method: str) -> Any:
        call = self._bulk_write if method == "bulk_write" else getattr(self._inner, method)
        if not callable(call):
            return call
        drain = method in CURSOR_METHODS
        if not self._async:

            def sync_call(*args: Any, **kwargs: Any) -> Any:
                with self._log.lock:
                    self._record(method, args)

                    def apply() -> Any:
                        before = self._before(method, args)
                        result = call(*args, **kwargs)
                        self._check_size(before)
                        return _ListCursor(list(result)) if drain else result

                    return self._play(method, apply)

            return sync_call

        async def async_call(*args: Any, **kwargs: Any) -> Any:
            with self._log.lock:  # mongomock-motor never suspends inside a call
                self._record(method, args)
                before = self._before(method, args)
                fault = self._log.fault_for(self._name, method)
                if fault is None or fault.kind == "lost_reply":
                    result = call(*args, **kwargs)
                    if inspect.isawaitable(result):
                        result = await result
                    self._check_size(before)
                    if drain:
                        result = _ListCursor(await result.to_list(None))
                if fault is None:
                    return result
                if fault.rival is not None:
                    fault.rival()
                raise fault.error(f"connection closed ({fault.kind} injected by the test harness)")

        return async_call


class _LockedDatabase:
    def __init__(
        self, inner: Any, log: CallLog, is_async: bool, raw: Any, server_version: str
    ) -> None:
        self._inner, self._log, self._async = inner, log, is_async
        self._raw, self._server_version = raw, server_version
        self.read_preference = getattr(inner, "read_preference", None)
        self.write_concern = getattr(inner, "write_concern", None)

    def get_collection(self, name: str, **kwargs: Any) -> _LockedCollection:
        return _LockedCollection(
            self._inner.get_collection(name, **kwargs),
            name,
            self._log,
            self._async,
            self._raw.get_collection(name),
        )

    def command(self, *args: Any, **kwargs: Any) -> Any:
        if args and args[0] in ("buildInfo", "buildinfo"):
            return self._build_info()
        return _LockedCollection(self._inner, "", self._log, self._async).command(*args, **kwargs)

    def _build_info(self) -> Any:
        """What a server of :attr:`MongomockHarness.server_version` answers (mongomock
        implements no ``buildInfo``)."""
        with self._log.lock:
            self._log.calls.append(("", "command"))
        numbers = [int(part) for part in self._server_version.split(".")]
        info = {"version": self._server_version, "versionArray": [*numbers, 0], "ok": 1.0}
        if not self._async:
            return info

        async def reply() -> dict[str, Any]:
            return info

        return reply()


class LockedClient:
    """A mongomock (or mongomock-motor) client whose every call holds the harness lock and is
    logged; closing it leaves the shared dataset alone."""

    def __init__(
        self,
        inner: Any,
        log: CallLog,
        *,
        is_async: bool = False,
        raw: Any = None,
        server_version: str = DEFAULT_SERVER_VERSION,
    ) -> None:
        self._inner, self._log, self._async = inner, log, is_async
        self._raw = raw if raw is not None else inner
        self._server_version = server_version
        self.database_kwargs: dict[str, Any] = {}
        """What the store passed to :meth:`get_database` last (read preference, write
        concern): the tests check what reaches the driver."""

    def get_database(self, name: str, **kwargs: Any) -> _LockedDatabase:
        self.database_kwargs = dict(kwargs)
        return _LockedDatabase(
            self._inner.get_database(name, **kwargs),
            self._log,
            self._async,
            self._raw.get_database(name),
            self._server_version,
        )

    def close(self) -> None:
        """Nothing to release: the dataset belongs to the harness."""


class MongomockHarness(StoreHarness):
    """An in-process mongomock dataset as the kit's dataset (see the module docstring)."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        persistent=False, multi_process=False, ordered_listing=True, exact_pages=True
    )

    def __init__(self, db: str = "harel", *, server_version: str = DEFAULT_SERVER_VERSION) -> None:
        with needs_harel_testing("mongo", "mongomock"):
            import mongomock

        self.db = db
        self.client: Any = mongomock.MongoClient()
        self.log = CallLog()
        self.server_version = server_version
        """The version ``buildInfo`` reports (a server the store must refuse: below 4.2)."""

    def sync_client(self) -> LockedClient:
        """A client over the dataset for ``MongoStore``."""
        return LockedClient(self.client, self.log, server_version=self.server_version)

    def async_client(self) -> LockedClient:
        """A mongomock-motor client over the same dataset for ``AsyncMongoStore``."""
        with needs_harel_testing("mongo", "mongomock_motor", "motor"):
            from mongomock_motor import AsyncMongoMockClient

        motor: Any = AsyncMongoMockClient(mock_mongo_client=self.client)
        return LockedClient(
            motor, self.log, is_async=True, raw=self.client, server_version=self.server_version
        )

    def inject(self, fault: Fault) -> Fault:
        """Play ``fault`` on the next matching driver call of any client of this dataset (see
        :class:`Fault`); returns it (its ``seen`` tells what it broke)."""
        with self.log.lock:
            self.log.faults.append(fault)
        return fault

    def open_sync(self) -> MongoStore:
        """A new ``MongoStore`` over the harness dataset."""
        return MongoStore(self.sync_client(), db=self.db, where=self.describe())

    async def open_async(self) -> AsyncMongoStore:
        """A new ``AsyncMongoStore`` over the harness dataset (under trio: over a
        ``MongoStore``, in worker threads)."""
        if current_library() != "asyncio":
            return await AsyncMongoStore.in_threads(self.open_sync)
        return await AsyncMongoStore.open(self.async_client(), db=self.db, where=self.describe())

    def database(self) -> Any:
        """The dataset's database, for direct reads in tests."""
        return self.client.get_database(self.db)

    def counting(self) -> Any:
        """A context manager collecting the driver calls made inside it."""
        return self.log.counting()

    def writing(self) -> Any:
        """A context manager collecting the writes made inside it, each with the documents
        it may have written (``(collection, method, ids)``)."""
        return self.log.writing()

    def url(self) -> None:
        """``None``: another interpreter cannot reach an in-process dataset."""
        return None

    def footprint(self, execution_id: str) -> list[str]:
        """Everything the dataset stores for ``execution_id`` (see :func:`footprint`)."""
        with self.log.lock:
            return footprint(self.database(), execution_id)

    def raw_commit(self) -> Callable[[str, int, str], None]:
        """One ``update_one`` through a new client of the dataset (see :func:`raw_commit`)."""
        return raw_commit(self.sync_client(), self.db)

    def raw_side_commit(self) -> RawSideCommit:
        """One ``update_one`` through a new client of the dataset (see
        :func:`raw_side_commit`)."""
        return raw_side_commit(self.sync_client(), self.db)

    def destroy(self) -> None:
        """Forget the dataset."""
        self.client.drop_database(self.db)

    def describe(self) -> str:
        """``mongo on mongomock (in-process, database ...)``."""
        return f"mongo on mongomock (in-process, database {self.db!r})"


# -- a real server --------------------------------------------------------------------------------


def command_ids(name: str, command: Any) -> tuple[Any, ...] | None:
    """The documents a write command may write (``None``: not a write)."""
    if name == "update":
        return tuple(i for u in command.get("updates", ()) for i in filter_ids(u.get("q")))
    if name == "delete":
        return tuple(i for d in command.get("deletes", ()) for i in filter_ids(d.get("q")))
    if name == "insert":
        return tuple(doc.get("_id", ANY_DOCUMENT) for doc in command.get("documents", ()))
    if name.lower() == "findandmodify":
        return filter_ids(command.get("query"))
    return None


class CommandLog(CallLog, monitoring.CommandListener):
    """Commands sent to the server (PyMongo command monitoring): real round trips."""

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in IGNORED_COMMANDS:
            return
        collection = event.command.get(event.command_name)
        with self.lock:
            name = collection if isinstance(collection, str) else ""
            self.calls.append((name, event.command_name))
            ids = command_ids(event.command_name, event.command)
            if ids is not None:
                self.writes.append((name, event.command_name, ids))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        return None

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        return None


class MongoServerHarness(StoreHarness):
    """A fresh random database on a real MongoDB server as the kit's dataset."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(self, url: str, *, db: str | None = None) -> None:
        base = make_options(url)
        self.db = db or f"{base.db}-kit-{uuid.uuid4().hex[:12]}"
        self._url = with_db(url, self.db)
        self.options = make_options(self._url)
        self.log = CommandLog()
        self._opened: list[Any] = []

    def _client_kwargs(self) -> dict[str, Any]:
        return {**self.options.client_kwargs(), "event_listeners": [self.log]}

    def sync_client(self) -> Any:
        """A new ``MongoClient`` of the server, its commands counted."""
        import pymongo

        return pymongo.MongoClient(self.options.driver_uri, **self._client_kwargs())

    def open_sync(self) -> MongoStore:
        """A new ``MongoStore`` (its own ``MongoClient``) over the harness database."""
        client = self.sync_client()
        return MongoStore(client, db=self.db, owns_client=True, where=self.options.where)

    async def open_async(self) -> AsyncMongoStore:
        """A new ``AsyncMongoStore`` (its own ``AsyncMongoClient``) over the harness database
        (under trio: over a ``MongoStore``, in worker threads)."""
        from pymongo import AsyncMongoClient

        if current_library() != "asyncio":
            return await AsyncMongoStore.in_threads(self.open_sync)

        client = AsyncMongoClient(self.options.driver_uri, **self._client_kwargs())
        return await AsyncMongoStore.open(
            client, db=self.db, owns_client=True, where=self.options.where
        )

    def server_address(self) -> tuple[str, int] | None:
        """The one server of the URL (``None`` for a seed list or ``mongodb+srv``: a proxy
        cannot stand in for a replica set the driver discovers)."""
        scheme, _, rest = self.options.driver_uri.partition("://")
        hosts = rest.rpartition("@")[2].partition("/")[0]
        if scheme != "mongodb" or "," in hosts or hosts.startswith("["):
            return None
        host, _, port = hosts.partition(":")
        return host, int(port or 27017)

    def _uri_at(self, host: str, port: int) -> str:
        """The URL through ``host:port``: a direct connection (no discovery past the proxy),
        short timeouts so a lost reply surfaces (and is resent) within seconds."""
        scheme, _, rest = self.options.driver_uri.partition("://")
        credentials, _, after = rest.rpartition("@")
        path = after.partition("/")[2]
        authdb, _, query = path.partition("?")
        extra = "directConnection=true&socketTimeoutMS=2000&connectTimeoutMS=2000"
        query = f"{query}&{extra}" if query else extra
        at = f"{credentials}@" if credentials else ""
        return f"{scheme}://{at}{quote(host)}:{port}/{authdb}?{query}"

    def _at_kwargs(self) -> dict[str, Any]:
        return {**self._client_kwargs(), "serverSelectionTimeoutMS": 2000}

    def open_sync_at(self, host: str, port: int) -> MongoStore:
        """A new ``MongoStore`` over this database that talks to ``host:port`` (a proxy)."""
        import pymongo

        client = pymongo.MongoClient(self._uri_at(host, port), **self._at_kwargs())
        return MongoStore(client, db=self.db, owns_client=True, where=self.options.where)

    async def open_async_at(self, host: str, port: int) -> AsyncMongoStore:
        """The async twin of :meth:`open_sync_at`."""
        from pymongo import AsyncMongoClient

        if current_library() != "asyncio":
            return await AsyncMongoStore.in_threads(partial(self.open_sync_at, host, port))

        client = AsyncMongoClient(self._uri_at(host, port), **self._at_kwargs())
        return await AsyncMongoStore.open(
            client, db=self.db, owns_client=True, where=self.options.where
        )

    def database(self) -> Any:
        """The harness database through a plain client (direct reads in tests)."""
        import pymongo

        client = pymongo.MongoClient(self.options.driver_uri, **self.options.client_kwargs())
        self._opened.append(client)
        return client.get_database(self.db)

    def counting(self) -> Any:
        """A context manager collecting the commands sent inside it."""
        return self.log.counting()

    def writing(self) -> Any:
        """A context manager collecting the write commands sent inside it, each with the
        documents it may have written (``(collection, command, ids)``)."""
        return self.log.writing()

    def url(self) -> str:
        """The URL of this database (another process opens the same dataset with it)."""
        return self._url

    def footprint(self, execution_id: str) -> list[str]:
        """Everything the database stores for ``execution_id`` (see :func:`footprint`)."""
        return footprint(self.database(), execution_id)

    def raw_commit(self) -> Callable[[str, int, str], None]:
        """One ``update_one`` through a new ``MongoClient`` (see :func:`raw_commit`)."""
        client = self.sync_client()
        self._opened.append(client)
        return raw_commit(client, self.db)

    def raw_side_commit(self) -> RawSideCommit:
        """One ``update_one`` through a new ``MongoClient`` (see :func:`raw_side_commit`)."""
        client = self.sync_client()
        self._opened.append(client)
        return raw_side_commit(client, self.db)

    def destroy(self) -> None:
        """Drop the harness database and close the plain clients."""
        import pymongo

        try:
            with (
                translate(self.options.where),
                pymongo.MongoClient(self.options.driver_uri, **self.options.client_kwargs()) as c,
            ):
                c.drop_database(self.db)
        finally:
            for client in self._opened:
                client.close()

    def describe(self) -> str:
        """``mongo <servers> (database ...)``."""
        return f"mongo {self.options.where}"


def harness_from_url(url: str, workdir: Path) -> StoreHarness:
    """A harness over a NEW database: on mongomock for the reserved host ``mongomock.invalid``,
    else on the server the URL names (a random database below the URL's ``db``).

    Nothing outside that database is read or written; ``workdir`` is not used.
    """
    del workdir
    options = make_options(url)
    hosts = options.driver_uri.partition("://")[2].rpartition("@")[2].partition("/")[0]
    if hosts.lower() == MOCK_HOST:
        return MongomockHarness(options.db)
    return MongoServerHarness(url)


@dataclass
class CannedResult:
    """What PyMongo's UpdateResult says, for plan tests (the plans read only these)."""

    matched_count: int = 1
    upserted_id: Any = None


def run_plan(
    plan: Generator[Request, Any, Any],
    answer: Callable[[Request], Any] = lambda request: CannedResult(),
) -> tuple[Any, list[Request]]:
    """Drive a plan with canned replies (``answer``; an exception it raises is thrown into
    the plan); the plan's value and every request it sent, each checked against the server
    rules (:func:`~harel_testing.mongo.violations`; ``pip install harel-testing[mongo]``)."""
    with needs_harel_testing("mongo"):
        from harel_testing.mongo import violations
    sent: list[Request] = []
    try:
        request = next(plan)
        while True:
            sent.append(request)
            assert violations(request) == [], (request, violations(request))
            try:
                reply = answer(request)
            except Exception as exc:
                request = plan.throw(exc)
            else:
                request = plan.send(reply)
    except StopIteration as stop:
        return stop.value, sent
