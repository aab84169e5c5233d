"""A local stand-in for one rqlite node, for tests: rqlite's HTTP API over a SQLite file.

Part of the test-only distribution (``pip install harel-testing[rqlite]``): the server is the
standard library's ``http.server``, so nothing of it ships in ``harel-store-rqlite``'s wheel.

No rqlite binary can be installed where this project is tested, so the backend's tests (and
the all-backends tests, through the harness) run against this server.  It is TEST SUPPORT, not
a product and not an rqlite emulator: it implements only what :mod:`harel_store_rqlite` uses,
and it fails the way rqlite's documentation and source (``db/db.go``, ``http/service.go``,
``http/request_parser.go``, ``command/stringer.go``) say a real node fails:

* ``POST /db/execute`` (``?transaction``: all statements in one transaction; the first error,
  whatever its kind, rolls it back and stops processing; without it each statement commits on
  its own and a failed one does not stop the others), ``POST /db/query`` (``?level=``; a
  statement that is not a read gets an ``error`` result) and ``POST /db/request`` (the unified
  endpoint: reads and writes mixed).  **The unified endpoint's ``?transaction`` is not
  all-or-nothing**, exactly as rqlite's ``DB.Request``: each statement is first *prepared* (to
  ask SQLite whether it is read-only); a statement that fails to prepare (no such table or
  column, a syntax error) gets its ``error`` result and processing *continues*, and the
  transaction is committed at the end; a statement that fails while running (a constraint, an
  integer overflow...) rolls the transaction back and stops (its error is the last result);
* statements as a JSON array of ``"SQL"`` strings or ``["SQL", p1, p2, ...]`` (positional) or
  ``["SQL", {"name": value}]`` (named) arrays; from version 8.31.0 (``version``), a string
  parameter shaped like a BLOB literal (``X'…'`` / ``x'…'`` of hex digits, surrounding
  whitespace ignored) is bound as a BLOB, and BLOBs come back base64-encoded;
* results ``{"results": [...]}`` with ``columns``/``types``/``values`` for reads and
  ``rows_affected``/``last_insert_id`` for writes (omitted when zero, as rqlite omits them),
  and a per-statement ``{"error": "..."}`` under HTTP 200;
* ``?level=``: ``none``, ``weak``, ``strong``, ``auto`` and (from 8.32.0) ``linearizable``;
  any other value is silently ``weak``, as rqlite's ``LevelFromString`` makes it (the level
  actually used is in the request log).  Reads at any level but ``strong`` are served
  concurrently with writes, from read connections of their own (a ``strong`` read goes through
  the Raft log on a real node, so here it waits for the write lock);
* Raft failures the way rqlite reports them: HTTP 200 with a top-level ``{"error": "..."}``
  (:attr:`FakeRqlite.raft_errors`: "timed out enqueuing operation", "store not ready" — not
  applied; "leadership lost while committing log", "snapshot restored while committing log" —
  the entry may or may not have been applied), and a request re-applied after a leadership
  change (:attr:`FakeRqlite.reapply`);
* ``GET /readyz`` (200 ``[+]node ok`` ... or 503 while there is no leader; ``?noleader``
  ignores the leader) and ``GET /status`` (a small JSON document); every reply carries
  ``X-RQLITE-VERSION``;
* HTTP basic auth: ``auth=(user, password)`` (every permission) or ``users={name: (password,
  permissions)}`` with rqlite's permission names: ``execute`` (``/db/execute``), ``query``
  (``/db/query``), both (``/db/request``), ``ready`` (``/readyz``), ``status`` (``/status``),
  ``all``; a request without the permission gets 401 with an empty body, as from rqlite;
* switches: :attr:`FakeRqlite.leader` ``False`` simulates "no leader yet" (503
  ``leader not found`` on every database request, 503 on ``/readyz``),
  :attr:`FakeRqlite.redirect_to` makes the node answer ``301 Moved Permanently`` with the
  leader's address in ``Location`` (as a follower does for clients that ask for redirects),
  :attr:`FakeRqlite.drop_replies` applies a request and then drops the connection
  unanswered (a node failing after it committed), and :meth:`FakeRqlite.hold_writes` keeps
  the write lock (reads still served).

Limits (what it does NOT do): one node, no Raft, no replication; every level reads the one
database (so levels differ only in concurrency); a statement is a read when its text starts
with ``SELECT``/``WITH``/``PRAGMA``/``EXPLAIN`` (rqlite asks SQLite's
``sqlite3_stmt_readonly``); no ``GET /db/query?q=``, no ``associative``, ``timings``,
``pretty``, queued writes, bulk API, backups, ``/nodes``; no non-deterministic function
rewriting; SQLite runs with ``synchronous=NORMAL`` (a crash of the test process may lose the
last writes).  Writes (and ``strong`` reads) are served one at a time under one lock, which
makes them linearizable, as rqlite's leader makes writes.  Every request is appended to
:attr:`FakeRqlite.requests` (method, path, query, level), so tests count requests per
operation.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import socket
import sqlite3
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from harel_store_rqlite._plan import version_of

LEVELS = frozenset({"none", "weak", "strong", "auto"})
"""The read consistency levels every rqlite 8 knows (``linearizable``: from 8.32.0)."""
LINEARIZABLE_SINCE = (8, 32, 0)
HEX_PARAMETERS_SINCE = (8, 31, 0)
DEFAULT_VERSION = "v9.1.2"
_READS = ("SELECT", "WITH", "PRAGMA", "EXPLAIN")
PERMISSIONS = frozenset({"all", "execute", "query", "ready", "status"})

TIMED_OUT_ENQUEUING = "timed out enqueuing operation"
"""Raft's enqueue timeout: the entry never reached the log (not applied)."""
STORE_NOT_READY = "store not ready"
"""The node's store is not open for requests yet (not applied)."""
LEADERSHIP_LOST = "leadership lost while committing log"
"""The leader was deposed while committing: the entry may still be committed by the next one."""
SNAPSHOT_RESTORED = "snapshot restored while committing log"
"""A snapshot restore aborted the commit wait: the entry may or may not be in the database."""


@dataclass(frozen=True, slots=True)
class RaftError:
    """One Raft failure to answer a database write with: HTTP 200 ``{"error": message}``,
    the request applied first when ``applied``."""

    message: str
    applied: bool = False


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    """One request the server received."""

    method: str
    path: str
    query: str
    level: str | None = None
    """The read consistency level the node used (an unknown one is ``weak``)."""

    @property
    def transaction(self) -> bool:
        """Whether the request asked for ``?transaction``."""
        return "transaction" in parse_qs(self.query, keep_blank_values=True)


class FakeRqlite:
    """One fake rqlite node over the SQLite file ``path`` (created if missing).

    ``start()`` binds ``host:port`` (port 0 picks a free one, kept for later restarts) and
    serves in daemon threads; ``stop()`` closes the listener and every open connection (the
    data stays in the file; ``start()`` again serves it on the same port); ``close()`` stops
    and closes the database.  Use it as a context manager.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        auth: tuple[str, str] | None = None,
        users: Mapping[str, tuple[str, Iterable[str]]] | None = None,
        version: str = DEFAULT_VERSION,
    ) -> None:
        self.path = Path(path)
        self.host = host
        self.port = port
        self.auth = auth
        """The user of :attr:`url` (every permission)."""
        self.users: dict[str, tuple[str, frozenset[str]]] = {}
        """``name -> (password, permissions)``; empty (and no ``auth``): no authentication."""
        if auth is not None:
            self.users[auth[0]] = (auth[1], frozenset({"all"}))
        for name, (password, perms) in (users or {}).items():
            granted = frozenset(perms)
            if not granted <= PERMISSIONS:
                raise ValueError(f"unknown permissions {sorted(granted - PERMISSIONS)}")
            self.users[name] = (password, granted)
        self.version = version
        """The ``X-RQLITE-VERSION`` the node reports (and whose behaviour it follows)."""
        self.raft_errors: list[RaftError] = []
        """Answer the next database writes with these Raft failures, one each, in order."""
        self.reapply = False
        """``True``: apply the next database write twice (a request re-forwarded to a new
        leader after a leadership change) and answer with the second application's results."""
        self.leader = True
        """``False``: no leader yet (503 on database requests and ``/readyz``)."""
        self.redirect_to: str | None = None
        """``http://host:port`` of the leader: answer every database request with a 301."""
        self.drop_replies = False
        """``True``: apply each database request, then drop the connection unanswered (a node
        that fails after committing: the client cannot know the outcome)."""
        self.requests: list[LoggedRequest] = []
        self._log_lock = threading.Lock()
        self._db_lock = threading.Lock()
        self._db = sqlite3.connect(
            str(self.path), isolation_level=None, check_same_thread=False, cached_statements=0
        )  # no statement cache: CPython 3.11's segfaults re-running a failed cached statement
        self._db.execute("PRAGMA journal_mode = WAL").fetchall()
        self._db.execute("PRAGMA synchronous = NORMAL").fetchall()
        self._readers = threading.local()
        self._reader_connections: list[sqlite3.Connection] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def http_url(self) -> str:
        """``http://host:port`` of this node (the port is known once started)."""
        return f"http://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The store URL of this node: ``rqlite://[user:password@]host:port``."""
        credentials = "" if self.auth is None else f"{self.auth[0]}:{self.auth[1]}@"
        return f"rqlite://{credentials}{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the node accepts connections."""
        return self._server is not None

    def start(self) -> Self:
        """Listen (again) and serve in a daemon thread."""
        if self._server is not None:
            return self
        server = _Server((self.host, self.port), _Handler)
        server.node = self
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-rqlite:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and drop every open connection (clients see the node go away)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        server.drop_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def close(self) -> None:
        """Stop and close the database file (it stays on disk)."""
        self.stop()
        with self._db_lock:
            self._db.close()
            for reader in self._reader_connections:
                reader.close()
            self._reader_connections.clear()

    @contextlib.contextmanager
    def hold_writes(self) -> Iterator[None]:
        """Hold the write lock for the ``with`` block: writes and ``strong`` reads wait, the
        other reads are still served."""
        with self._db_lock:
            yield

    def knows(self, since: tuple[int, ...]) -> bool:
        """Whether the node's version is ``since`` or newer (a non-release version: yes)."""
        parsed = version_of(self.version)
        return parsed is None or parsed >= since

    def effective_level(self, requested: str | None) -> str:
        """The level rqlite reads at for ``?level=requested``: unknown levels are ``weak``."""
        level = (requested or "weak").lower()
        if level == "linearizable" and self.knows(LINEARIZABLE_SINCE):
            return level
        return level if level in LEVELS else "weak"

    def permitted(self, authorization: str, needs: Iterable[str]) -> bool:
        """Whether the ``Authorization`` header's user holds every permission of ``needs``."""
        if not self.users:
            return True
        try:
            scheme, _, encoded = authorization.partition(" ")
            name, _, password = base64.b64decode(encoded).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        user = self.users.get(name)
        if scheme != "Basic" or user is None or user[0] != password:
            return False
        return "all" in user[1] or all(perm in user[1] for perm in needs)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the request log ------------------------------------------------------------------------

    def log(self, method: str, path: str, query: str, level: str | None = None) -> None:
        """Record one request."""
        with self._log_lock:
            self.requests.append(LoggedRequest(method, path, query, level))

    def next_raft_error(self) -> RaftError | None:
        """The Raft failure the next database write answers with, if any (taken)."""
        with self._log_lock:
            return self.raft_errors.pop(0) if self.raft_errors else None

    def take_requests(self) -> list[LoggedRequest]:
        """The requests received since the last call (and forget them)."""
        with self._log_lock:
            taken, self.requests = self.requests, []
        return taken

    # -- the database ---------------------------------------------------------------------------

    def run(
        self,
        statements: list[Any],
        *,
        transaction: bool,
        reads: bool,
        writes: bool,
        level: str = "weak",
    ) -> list[dict[str, Any]]:
        """Run parsed statements as rqlite would; one result per statement run.

        ``/db/execute`` (``writes`` only) stops at and rolls back on any error of a
        transaction; ``/db/request`` (``reads`` and ``writes``) skips a statement that fails
        to prepare (its error result, processing continues, the transaction commits) and rolls
        back on an error while running; ``/db/query`` gives every statement its result, errors
        included (``DB.Query``); ``/db/query`` at a level other than ``strong`` runs on
        a read connection of the calling thread, concurrently with writes.
        """
        if reads and not writes and level != "strong":
            return self._run_on(self._reader(), statements, transaction, reads, writes)
        with self._db_lock:
            return self._run_on(self._db, statements, transaction, reads, writes)

    def _reader(self) -> sqlite3.Connection:
        reader: sqlite3.Connection | None = getattr(self._readers, "connection", None)
        if reader is None:
            reader = sqlite3.connect(
                f"file:{self.path}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=0,
            )
            self._readers.connection = reader
            with self._log_lock:
                self._reader_connections.append(reader)
        return reader

    def _prepare_failure(self, sql: str, params: Any) -> str | None:
        """Why ``sql`` fails to prepare on the committed schema, or ``None``.  ``EXPLAIN``
        prepares without running; it runs on a read connection (on the write connection it
        would reset ``changes()``), after a read of ``sqlite_master`` so that the connection's
        cached schema is current.  An ``EXPLAIN`` statement is taken as failing."""
        if sql.lstrip().upper().startswith("EXPLAIN"):
            return "an EXPLAIN that failed"
        reader = self._reader()
        try:
            reader.execute("SELECT count(*) FROM sqlite_master").fetchall()
            reader.execute(f"EXPLAIN {sql}", params).fetchall()
        except (sqlite3.Error, OverflowError, ValueError) as exc:
            return str(exc)
        return None

    def _run_on(
        self,
        db: sqlite3.Connection,
        statements: list[Any],
        transaction: bool,
        reads: bool,
        writes: bool,
    ) -> list[dict[str, Any]]:
        unified = reads and writes
        if transaction:
            db.execute("BEGIN IMMEDIATE" if writes else "BEGIN")
        results: list[dict[str, Any]] = []
        try:
            for statement in statements:
                result, runtime = self._one(
                    db, statement, reads=reads, writes=writes, unified=unified
                )
                results.append(result)
                if transaction and writes and "error" in result and (runtime or not unified):
                    db.execute("ROLLBACK")
                    return results
        except BaseException:
            if transaction:
                db.execute("ROLLBACK")
            raise
        if transaction:
            db.execute("COMMIT")
        return results

    def _one(
        self, db: sqlite3.Connection, statement: Any, *, reads: bool, writes: bool, unified: bool
    ) -> tuple[dict[str, Any], bool]:
        """One statement's result, and whether its error (if any) came while running (not
        while parsing or preparing it)."""
        try:
            sql, params = _statement(statement, hex_blobs=self.knows(HEX_PARAMETERS_SINCE))
        except ValueError as exc:
            return {"error": str(exc)}, True
        is_read = sql.lstrip().upper().startswith(_READS)
        if unified and not is_read:  # DB.Request prepares each statement first
            failure = self._prepare_failure(sql, params)
            if failure is not None:
                return {"error": failure}, False
        if is_read and not reads:
            return {"error": "attempt to read via the execute endpoint"}, True
        if not is_read and not writes:
            return {"error": "attempt to change database via query operation"}, True
        try:
            cursor = db.execute(sql, params)
            rows = cursor.fetchall()
        except (sqlite3.Error, OverflowError, ValueError) as exc:
            prepare = unified and is_read and self._prepare_failure(sql, params) is not None
            return {"error": str(exc)}, not prepare
        if is_read:
            result: dict[str, Any] = {
                "columns": [column[0] for column in cursor.description or ()],
                "types": ["" for _ in cursor.description or ()],
            }
            if rows:
                result["values"] = [[_json_value(value) for value in row] for row in rows]
            return result, True
        result = {}
        if cursor.rowcount > 0:
            result["rows_affected"] = cursor.rowcount
        if cursor.lastrowid:
            result["last_insert_id"] = cursor.lastrowid
        return result, True


def blob_literal(value: str) -> bytes | None:
    """The bytes of a string rqlite (8.31+) binds as a BLOB: ``X'…'``/``x'…'`` of an even
    number of hex digits, surrounding whitespace ignored (rqlite's ``db.ParseHex``)."""
    text = value.strip()
    if len(text) < 3 or text[0] not in "xX" or text[1] != "'" or text[-1] != "'":
        return None
    try:
        return binascii.unhexlify(text[2:-1])
    except (binascii.Error, ValueError):
        return None


def _parameter(value: Any, hex_blobs: bool) -> Any:
    if isinstance(value, (list, dict)):
        raise ValueError(f"unsupported parameter type: {type(value).__name__}")
    if hex_blobs and isinstance(value, str):
        blob = blob_literal(value)
        return value if blob is None else blob
    return value


def _statement(item: Any, *, hex_blobs: bool = False) -> tuple[str, Any]:
    """``(sql, params)`` of one element of a request body."""
    if isinstance(item, str):
        return item, ()
    if isinstance(item, list) and item and isinstance(item[0], str):
        params = item[1:]
        if len(params) == 1 and isinstance(params[0], dict):
            return item[0], {k: _parameter(v, hex_blobs) for k, v in params[0].items()}
        return item[0], [_parameter(value, hex_blobs) for value in params]
    raise ValueError("a statement must be a string or an array starting with a string")


def _json_value(value: Any) -> Any:
    return base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value


class _Server(ThreadingHTTPServer):
    """The listener; remembers its open connections so that ``stop`` can drop them."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # many clients connecting at once must not be reset
    node: FakeRqlite

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.open_connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that vanished mid-request (killed, timed out) is normal here: stay quiet;
        anything else is printed as the standard server does."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.open_connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.open_connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        with self.connections_lock:
            connections, self.open_connections = self.open_connections, set()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                connection.close()


class _Handler(BaseHTTPRequestHandler):
    """rqlite's endpoints (see the module docstring)."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr logging."""

    @property
    def node(self) -> FakeRqlite:
        return self.server.node

    def _reply(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-RQLITE-VERSION", self.node.version)
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _text(self, status: int, text: str, **headers: str) -> None:
        self._reply(status, text.encode(), "text/plain; charset=utf-8", **headers)

    def _json(self, document: Any) -> None:
        self._reply(HTTPStatus.OK, json.dumps(document).encode(), "application/json")

    def _authorised(self, *needs: str) -> bool:
        """Whether the request's user holds ``needs``; else answer 401 with an empty body (as
        rqlite does, for a wrong password and a missing permission alike)."""
        if self.node.permitted(self.headers.get("Authorization", ""), needs):
            return True
        self._reply(HTTPStatus.UNAUTHORIZED, b"", "text/plain; charset=utf-8")
        return False

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        self.node.log("GET", parts.path, parts.query)
        needs = {"/readyz": "ready", "/status": "status"}.get(parts.path)
        if needs is not None and not self._authorised(needs):
            return
        query = parse_qs(parts.query, keep_blank_values=True)
        if parts.path == "/readyz":
            if self.node.leader or "noleader" in query:
                self._text(HTTPStatus.OK, "[+]node ok\n[+]leader ok\n[+]store ok\n")
            else:
                self._text(HTTPStatus.SERVICE_UNAVAILABLE, "[+]node ok\n[+]leader not ok\n")
        elif parts.path == "/status":
            state = "Leader" if self.node.leader else "Candidate"
            self._json({"build": {"version": "fake"}, "store": {"raft": {"state": state}}})
        else:
            self._text(HTTPStatus.NOT_FOUND, "404 page not found\n")

    def do_POST(self) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        level = self.node.effective_level(query["level"][0] if query.get("level") else None)
        self.node.log("POST", parts.path, parts.query, level)
        body = self._read_body()
        endpoints = {
            "/db/execute": (False, True),
            "/db/query": (True, False),
            "/db/request": (True, True),
        }
        if parts.path not in endpoints:
            self._text(HTTPStatus.NOT_FOUND, "404 page not found\n")
            return
        reads, writes = endpoints[parts.path]
        if not self._authorised(*(("query",) if reads else ()), *(("execute",) if writes else ())):
            return
        if self.node.redirect_to is not None:
            location = f"{self.node.redirect_to}{self.path}"
            self._text(HTTPStatus.MOVED_PERMANENTLY, "Moved Permanently\n", Location=location)
            return
        if not self.node.leader:
            self._text(HTTPStatus.SERVICE_UNAVAILABLE, "leader not found\n")
            return
        try:
            statements = json.loads(body)
        except ValueError:
            self._text(HTTPStatus.BAD_REQUEST, "invalid JSON body\n")
            return
        if not isinstance(statements, list):
            self._text(HTTPStatus.BAD_REQUEST, "the body must be a JSON array of statements\n")
            return
        transaction = "transaction" in query

        def run() -> list[dict[str, Any]]:
            return self.node.run(
                statements, transaction=transaction, reads=reads, writes=writes, level=level
            )

        failure = self.node.next_raft_error() if writes else None
        if failure is not None:
            if failure.applied:
                run()
            self._json({"error": failure.message})
            return
        if writes and self.node.reapply:
            self.node.reapply = False
            run()  # the first leader applied it; the reply was lost in the leadership change
        results = run()
        if self.node.drop_replies:
            self.close_connection = True
            self.request.shutdown(socket.SHUT_RDWR)
            return
        self._json({"results": results})
