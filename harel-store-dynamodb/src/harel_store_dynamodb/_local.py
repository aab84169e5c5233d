"""A local moto server speaking the DynamoDB HTTP API (``local=moto``, and the tests).

For tests and demos only (needs ``pip install "moto[server]"``).  moto's DynamoDB backend is
served by werkzeug on a loopback port, with HTTP/1.1 keep-alive and without moto's
all-services dispatcher (only DynamoDB is served, so every request skips the service
lookup).  moto's in-memory backend is not thread-safe (two racing conditional writes can both
pass their condition), so requests are applied one at a time, which is the per-request
atomicity DynamoDB itself guarantees.  The store talks to it through botocore/aiobotocore
exactly as to AWS; nothing is patched.  Data lives in the serving process's memory.

* :func:`moto_endpoint` — one server per interpreter, in a daemon thread (``local=moto``);
* :class:`MotoServer` — a server you start and stop yourself (in this process);
* ``python -m harel_store_dynamodb._local PORT`` — a server in its own process.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
import threading
from typing import Any

from harel.store.errors import StoreConfigError

_LOCK = threading.Lock()
_SHARED: MotoServer | None = None


def _dynamodb_app() -> Any:
    try:
        from moto.moto_server.werkzeug_app import create_backend_app
    except ImportError as exc:
        raise StoreConfigError(
            'local=moto needs moto\'s server: pip install "moto[server]" (a test dependency); '
            "or point endpoint_url at a running DynamoDB-compatible server"
        ) from exc
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = create_backend_app("dynamodb")
    lock = threading.Lock()

    def serialized(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        with lock:  # the whole request, response body included
            return [b"".join(app(environ, start_response))]

    return serialized


def _make_server(port: int) -> tuple[Any, set[Any]]:
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    connections: set[Any] = set()

    class KeepAliveHandler(MotoRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            connections.add(self.connection)

        def finish(self) -> None:
            connections.discard(self.connection)
            super().finish()

    server = make_server(
        "127.0.0.1", port, _dynamodb_app(), threaded=True, request_handler=KeepAliveHandler
    )
    return server, connections


class MotoServer:
    """moto's DynamoDB on ``127.0.0.1:port`` (0: a free port), served from a daemon thread.

    :meth:`stop` closes the listening socket too, so a new server can take the same port (a
    server restart); the data of moto's in-process backend outlives the restart.
    """

    def __init__(self, port: int = 0) -> None:
        self._server, self._connections = _make_server(port)
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
        for connection in list(self._connections):
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
    server, _connections = _make_server(int(argv[0]) if argv else 0)
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
