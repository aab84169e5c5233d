"""A loopback TCP proxy that counts round trips (and can add latency) between a store and its
server.

Backends' tests put it between the driver and the real server to prove how many network turns
each operation takes; benchmarks use its delay to make round trips visible in throughput::

    with CountingProxy("127.0.0.1", 5432) as proxy:
        store = PostgresStore.from_url(f"postgresql://postgres@127.0.0.1:{proxy.port}/test")
        proxy.reset()
        store.commit(exe, [])
        assert proxy.round_trips == 1

A *round trip* is counted each time the server starts answering after the client has sent
something on that connection: pipelined requests sent before the first answer count once, as
they cost one network latency.  The count is updated before the answer is forwarded, so it is
final when the client's call returns.  Loopback only; it stops with :meth:`stop` (or the
``with`` block) and every connection thread is a daemon.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from types import TracebackType
from typing import Self

_CHUNK = 65536


class CountingProxy:
    """Forward ``127.0.0.1:<port>`` to ``(target_host, target_port)``, counting round trips.

    ``delay`` seconds are slept before each forwarded chunk, in each direction.
    """

    def __init__(self, target_host: str, target_port: int, *, delay: float = 0.0) -> None:
        if delay < 0:
            raise ValueError(f"delay must be >= 0 seconds, got {delay!r}")
        self.target = (target_host, int(target_port))
        self.delay = float(delay)
        self._lock = threading.Lock()
        self._round_trips = 0
        self._connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.host, self.port = self._listener.getsockname()[:2]
        self._stopped = threading.Event()
        self._sockets: list[socket.socket] = []
        self._acceptor = threading.Thread(
            target=self._accept_loop, name="harel-proxy-accept", daemon=True
        )

    @property
    def round_trips(self) -> int:
        """Round trips counted since the start or the last :meth:`reset`."""
        with self._lock:
            return self._round_trips

    @property
    def connections(self) -> int:
        """Client connections accepted since the start or the last :meth:`reset`."""
        with self._lock:
            return self._connections

    def reset(self) -> None:
        """Zero the counters (open connections stay open)."""
        with self._lock:
            self._round_trips = 0
            self._connections = 0

    def start(self) -> Self:
        """Start accepting connections (idempotent)."""
        if not self._acceptor.is_alive() and not self._stopped.is_set():
            self._acceptor.start()
        return self

    def stop(self) -> None:
        """Close the listener and every proxied connection (idempotent)."""
        self._stopped.set()
        self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _close(sock)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                _close(client)
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            state = _Connection()
            with self._lock:
                self._connections += 1
                self._sockets.extend((client, server))
            for source, sink, upstream in ((client, server, True), (server, client, False)):
                threading.Thread(
                    target=self._pump,
                    args=(source, sink, upstream, state),
                    name="harel-proxy-pump",
                    daemon=True,
                ).start()

    def _pump(
        self, source: socket.socket, sink: socket.socket, upstream: bool, state: _Connection
    ) -> None:
        try:
            while True:
                data = source.recv(_CHUNK)
                if not data:
                    break
                if self.delay:
                    time.sleep(self.delay)
                with self._lock:
                    if upstream:
                        state.client_spoke = True
                    elif state.client_spoke:
                        state.client_spoke = False
                        self._round_trips += 1
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)


class _Connection:
    """Per-connection turn state: whether the client has spoken since the server last did."""

    __slots__ = ("client_spoke",)

    def __init__(self) -> None:
        self.client_spoke = False


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


__all__ = ["CountingProxy"]
