"""A local moto server speaking the DynamoDB HTTP API (``local=moto``, and the tests).

For tests and demos only: ``pip install harel-testing[dynamodb]`` brings ``moto[server]``.
moto's DynamoDB WSGI app (moto's server mode, DynamoDB only, so requests skip moto's
all-services dispatcher) is served on a loopback port by a small HTTP/1.1 server that keeps
connections alive (werkzeug's development server closes every connection, which costs a TCP
handshake and a thread per request).  moto's in-memory backend is not thread-safe (two racing
conditional writes can both pass their condition), so requests are applied one at a time: the
per-request atomicity DynamoDB itself guarantees.  The store talks to it through
botocore/aiobotocore exactly as to AWS; nothing is patched.  Data lives in the serving
process's memory.

* :func:`moto_endpoint` — one server per interpreter, in a daemon thread (``local=moto``);
* :class:`MotoServer` — a server you start and stop (and restart on its port) yourself;
* ``python -m harel_testing.dynamodb PORT`` — a server in its own process.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from harel.store.common.lazy import needs_harel_testing

_LOCK = threading.Lock()
_SHARED: MotoServer | None = None
_HOP_BY_HOP = frozenset({"connection", "content-length", "transfer-encoding", "keep-alive"})


def _dynamodb_app() -> Any:
    with needs_harel_testing("dynamodb", "moto", "flask", "flask_cors", "werkzeug"):
        from moto.moto_server.werkzeug_app import create_backend_app
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    return create_backend_app("dynamodb")


class _Handler(BaseHTTPRequestHandler):
    """One keep-alive connection: each request is handed to the WSGI app under the lock."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # no delayed-ACK stall between writes
    wbufsize = 1 << 16  # the response leaves in one write (flushed after each request)
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.connections.add(self.connection)

    def finish(self) -> None:
        self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: no line per request."""

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        environ: dict[str, Any] = {
            "REQUEST_METHOD": self.command,
            "SCRIPT_NAME": "",
            "PATH_INFO": unquote(parts.path) or "/",
            "QUERY_STRING": parts.query,
            "RAW_URI": self.path,
            "REQUEST_URI": self.path,
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": str(self.server.server_address[1]),
            "SERVER_PROTOCOL": self.request_version,
            "REMOTE_ADDR": self.client_address[0],
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(length),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for name, value in self.headers.items():
            key = "HTTP_" + name.upper().replace("-", "_")
            if key not in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"):
                environ[key] = value
        status: list[Any] = []

        def start_response(line: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            status[:] = [line, headers]
            return lambda data: None

        with self.server.lock:
            chunks = self.server.app(environ, start_response)
            try:
                payload = b"".join(chunks)
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
        line, headers = status
        code, _, reason = line.partition(" ")
        self.send_response(int(code), reason)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve


class _Server(ThreadingHTTPServer):
    """Threads per connection, one app call at a time, connections tracked for shutdown."""

    daemon_threads = True

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.app = _dynamodb_app()
        self.lock = threading.Lock()
        self.connections: set[socket.socket] = set()


class MotoServer:
    """moto's DynamoDB on ``127.0.0.1:port`` (0: a free port), served from a daemon thread.

    :meth:`stop` closes the listening socket and every open connection, so a new server can
    take the same port (a server restart); moto's in-process data outlives the restart.
    """

    def __init__(self, port: int = 0) -> None:
        self._server = _Server(port)
        self.port: int = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="harel-moto", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving, drop every open connection and release the port (idempotent)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()
        for connection in list(self._server.connections):
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


def moto_endpoint() -> str:
    """The endpoint of this process's shared moto server (started on first use)."""
    global _SHARED
    with _LOCK:
        if _SHARED is None:
            _SHARED = MotoServer()
        return _SHARED.endpoint


def main(argv: list[str]) -> None:
    """Serve on the port given (0: pick one) and print ``listening <port>`` once bound."""
    server = _Server(int(argv[0]) if argv else 0)
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
