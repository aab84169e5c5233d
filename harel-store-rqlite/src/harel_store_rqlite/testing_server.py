"""A local stand-in for one rqlite node, for tests: rqlite's HTTP API over a SQLite file.

No rqlite binary can be installed where this project is tested, so the backend's tests (and
the all-backends tests, through the harness) run against this server.  It is TEST SUPPORT, not
a product and not an rqlite emulator: it implements only what :mod:`harel_store_rqlite` uses,
the way rqlite's API documentation describes it:

* ``POST /db/execute`` (``?transaction``: all statements in one transaction, processing stops
  at the first error and nothing is kept; without it each statement commits on its own and a
  failed one does not stop the others), ``POST /db/query`` (``?level=none|weak|strong|
  linearizable|auto``; any other level is a 400; a statement that is not a read gets an
  ``error`` result) and ``POST /db/request`` (the unified endpoint: reads and writes mixed,
  ``?transaction`` and ``?level`` as above);
* statements as a JSON array of ``"SQL"`` strings or ``["SQL", p1, p2, ...]`` (positional) or
  ``["SQL", {"name": value}]`` (named) arrays;
* results ``{"results": [...]}`` with ``columns``/``types``/``values`` for reads and
  ``rows_affected``/``last_insert_id`` for writes (omitted when zero, as rqlite omits them),
  and a per-statement ``{"error": "..."}`` under HTTP 200;
* ``GET /readyz`` (200 ``[+]node ok`` ... or 503 while there is no leader; ``?noleader``
  ignores the leader) and ``GET /status`` (a small JSON document);
* HTTP basic auth when built with ``auth=(user, password)`` (401 otherwise);
* three switches: :attr:`FakeRqlite.leader` ``False`` simulates "no leader yet" (503
  ``leader not found`` on every database request, 503 on ``/readyz``),
  :attr:`FakeRqlite.redirect_to` makes the node answer ``301 Moved Permanently`` with the
  leader's address in ``Location`` (as a follower does for clients that ask for redirects),
  and :attr:`FakeRqlite.drop_replies` applies a request and then drops the connection
  unanswered (a node failing after it committed).

Limits (what it does NOT do): one node, no Raft, no replication; every level reads the one
database (so levels differ only in validation); a statement is a read when its text starts with
``SELECT``/``WITH``/``PRAGMA``/``EXPLAIN`` (rqlite asks SQLite's ``sqlite3_stmt_readonly``); no
``GET /db/query?q=``, no ``associative``, ``timings``, ``pretty``, queued writes, bulk API,
backups, ``/nodes``; no non-deterministic function rewriting; SQLite runs with
``synchronous=NORMAL`` (a crash of the test process may lose the last writes).  Requests are
served one at a time under one lock, which makes every request linearizable, as rqlite's leader
makes writes.  Every request is appended to :attr:`FakeRqlite.requests` (method, path, query),
so tests count requests per operation.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import sqlite3
import sys
import threading
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

LEVELS = frozenset({"none", "weak", "strong", "linearizable", "auto"})
_READS = ("SELECT", "WITH", "PRAGMA", "EXPLAIN")


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    """One request the server received."""

    method: str
    path: str
    query: str

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
    ) -> None:
        self.path = Path(path)
        self.host = host
        self.port = port
        self.auth = auth
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
        self._db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode = WAL").fetchall()
        self._db.execute("PRAGMA synchronous = NORMAL").fetchall()
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

    def log(self, method: str, path: str, query: str) -> None:
        """Record one request."""
        with self._log_lock:
            self.requests.append(LoggedRequest(method, path, query))

    def take_requests(self) -> list[LoggedRequest]:
        """The requests received since the last call (and forget them)."""
        with self._log_lock:
            taken, self.requests = self.requests, []
        return taken

    # -- the database ---------------------------------------------------------------------------

    def run(
        self, statements: list[Any], *, transaction: bool, reads: bool, writes: bool
    ) -> list[dict[str, Any]]:
        """Run parsed statements as rqlite would; one result per statement run."""
        with self._db_lock:
            if transaction:
                self._db.execute("BEGIN IMMEDIATE")
            results: list[dict[str, Any]] = []
            try:
                for statement in statements:
                    results.append(self._one(statement, reads=reads, writes=writes))
                    if transaction and "error" in results[-1]:
                        break
            finally:
                if transaction:
                    failed = not results or "error" in results[-1] or len(results) < len(statements)
                    self._db.execute("ROLLBACK" if failed else "COMMIT")
            return results

    def _one(self, statement: Any, *, reads: bool, writes: bool) -> dict[str, Any]:
        try:
            sql, params = _statement(statement)
        except ValueError as exc:
            return {"error": str(exc)}
        is_read = sql.lstrip().upper().startswith(_READS)
        if is_read and not reads:
            return {"error": "attempt to read via the execute endpoint"}
        if not is_read and not writes:
            return {"error": "attempt to change database via query operation"}
        try:
            cursor = self._db.execute(sql, params)
            rows = cursor.fetchall()
        except (sqlite3.Error, OverflowError, ValueError) as exc:
            return {"error": str(exc)}
        if is_read:
            result: dict[str, Any] = {
                "columns": [column[0] for column in cursor.description or ()],
                "types": ["" for _ in cursor.description or ()],
            }
            if rows:
                result["values"] = [[_json_value(value) for value in row] for row in rows]
            return result
        result = {}
        if cursor.rowcount > 0:
            result["rows_affected"] = cursor.rowcount
        if cursor.lastrowid:
            result["last_insert_id"] = cursor.lastrowid
        return result


def _statement(item: Any) -> tuple[str, Any]:
    """``(sql, params)`` of one element of a request body."""
    if isinstance(item, str):
        return item, ()
    if isinstance(item, list) and item and isinstance(item[0], str):
        params = item[1:]
        if len(params) == 1 and isinstance(params[0], dict):
            return item[0], params[0]
        for value in params:
            if isinstance(value, (list, dict)):
                raise ValueError(f"unsupported parameter type: {type(value).__name__}")
        return item[0], params
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
        self.send_header("X-Rqlite-Version", "fake")
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _text(self, status: int, text: str, **headers: str) -> None:
        self._reply(status, text.encode(), "text/plain; charset=utf-8", **headers)

    def _json(self, document: Any) -> None:
        self._reply(HTTPStatus.OK, json.dumps(document).encode(), "application/json")

    def _authorised(self) -> bool:
        if self.node.auth is None:
            return True
        expected = base64.b64encode(":".join(self.node.auth).encode()).decode()
        if self.headers.get("Authorization", "") == f"Basic {expected}":
            return True
        self._text(HTTPStatus.UNAUTHORIZED, "unauthorized", WWW_Authenticate='Basic realm="rqlite"')
        return False

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        self.node.log("GET", parts.path, parts.query)
        if not self._authorised():
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
        self.node.log("POST", parts.path, parts.query)
        body = self._read_body()
        if not self._authorised():
            return
        endpoints = {
            "/db/execute": (False, True),
            "/db/query": (True, False),
            "/db/request": (True, True),
        }
        if parts.path not in endpoints:
            self._text(HTTPStatus.NOT_FOUND, "404 page not found\n")
            return
        if self.node.redirect_to is not None:
            location = f"{self.node.redirect_to}{self.path}"
            self._text(HTTPStatus.MOVED_PERMANENTLY, "Moved Permanently\n", Location=location)
            return
        if not self.node.leader:
            self._text(HTTPStatus.SERVICE_UNAVAILABLE, "leader not found\n")
            return
        query = parse_qs(parts.query, keep_blank_values=True)
        level = (query.get("level") or ["weak"])[0]
        reads, writes = endpoints[parts.path]
        if reads and level not in LEVELS:
            self._text(HTTPStatus.BAD_REQUEST, f"unrecognized read consistency level: {level}\n")
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
        results = self.node.run(statements, transaction=transaction, reads=reads, writes=writes)
        if self.node.drop_replies:
            self.close_connection = True
            self.request.shutdown(socket.SHUT_RDWR)
            return
        self._json({"results": results})
