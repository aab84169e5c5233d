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
from collections.abc import Callable
from types import TracebackType
from typing import Literal, Self

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
            if self._refusing():
                _close(client)
                continue
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
                if not self._forward(data, sink, upstream, state):
                    break
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)

    def _refusing(self) -> bool:
        """Whether new connections are closed at once (never, here)."""
        return False

    def _forward(
        self, data: bytes, sink: socket.socket, upstream: bool, state: _Connection
    ) -> bool:
        """Send ``data`` on; ``False`` ends the connection (both sides are closed)."""
        sink.sendall(data)
        return True


class _Connection:
    """Per-connection state: whether the client has spoken since the server last did, the
    tail of what the client sent (to find a fault's marker across chunks), and whether the
    server's next answer is to be swallowed."""

    __slots__ = ("client_spoke", "cut", "swallow", "tail")

    def __init__(self) -> None:
        self.client_spoke = False
        self.cut = False
        self.tail = b""
        self.swallow: _Fault | None = None


FaultMode = Literal["drop_request", "drop_reply", "cut_after_forward"]
"""How :meth:`FaultProxy.arm` breaks the request that carries its marker:

* ``drop_request`` — the request is never forwarded; the connection is cut (nothing reached
  the server);
* ``drop_reply`` — the request is forwarded, the server's answer is swallowed, the
  connection is cut (the request was applied, the client cannot know);
* ``cut_after_forward`` — the request is forwarded and the connection is cut at once, before
  any answer (the server may or may not apply it).
"""

FAULT_MODES: tuple[FaultMode, ...] = ("drop_request", "drop_reply", "cut_after_forward")


class _Fault:
    """One armed fault: its mode, the marker that picks the request, the step run in between."""

    __slots__ = ("between", "marker", "mode")

    def __init__(self, mode: FaultMode, marker: bytes, between: Callable[[], None] | None) -> None:
        self.mode = mode
        self.marker = marker
        self.between = between


class FaultProxy(CountingProxy):
    """A :class:`CountingProxy` that breaks one chosen request, or plays a server outage.

    :meth:`arm` picks the first request (after arming) whose bytes contain ``marker`` and breaks
    it as ``mode`` says (:data:`FaultMode`), running ``between`` (e.g. a rival commit on a
    connection of its own) before the client sees the connection cut.  One-shot: later requests
    and reconnections pass through untouched.  :meth:`down` cuts every connection and refuses new
    ones (the server looks unreachable) until :meth:`up`.  Loopback only, like its base.
    """

    def __init__(self, target_host: str, target_port: int, *, delay: float = 0.0) -> None:
        super().__init__(target_host, target_port, delay=delay)
        self._fault: _Fault | None = None
        self._fired = threading.Event()
        self._between_error: BaseException | None = None
        self._down = False

    def arm(
        self, mode: FaultMode, *, marker: bytes, between: Callable[[], None] | None = None
    ) -> None:
        """Break the next request that carries ``marker`` (see :data:`FaultMode`)."""
        if mode not in FAULT_MODES:
            raise ValueError(f"mode must be one of {', '.join(FAULT_MODES)}, got {mode!r}")
        if not marker:
            raise ValueError("marker must be a non-empty byte string")
        with self._lock:
            self._fault = _Fault(mode, bytes(marker), between)
            self._fired.clear()
            self._between_error = None

    @property
    def fired(self) -> bool:
        """Whether the armed fault has broken its request (and run ``between``)."""
        return self._fired.is_set()

    def wait_fired(self, timeout: float) -> bool:
        """Wait until the armed fault has broken its request and ``between`` has returned (a
        store with a short request timeout may have re-sent meanwhile); whether it did."""
        return self._fired.wait(timeout)

    @property
    def between_error(self) -> BaseException | None:
        """What ``between`` raised, if it raised (it runs on a proxy thread)."""
        return self._between_error

    def down(self) -> None:
        """Cut every open connection and refuse new ones until :meth:`up`."""
        with self._lock:
            self._down = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _close(sock)

    def up(self) -> None:
        """Accept connections again after :meth:`down`."""
        with self._lock:
            self._down = False

    def _refusing(self) -> bool:
        with self._lock:
            return self._down

    def _run_between(self, fault: _Fault) -> None:
        if fault.between is not None:
            try:
                fault.between()
            except BaseException as exc:  # reported to the test, never kills the proxy
                self._between_error = exc
        self._fired.set()

    def _take(self, data: bytes, state: _Connection) -> _Fault | None:
        """The armed fault when ``data`` (with the connection's tail) carries its marker."""
        with self._lock:
            fault = self._fault
            if fault is None:
                return None
            seen = state.tail + data
            state.tail = seen[-max(len(fault.marker) - 1, 1) :]
            if fault.marker not in seen:
                return None
            self._fault = None
            return fault

    def _forward(
        self, data: bytes, sink: socket.socket, upstream: bool, state: _Connection
    ) -> bool:
        if not upstream:
            if state.cut:  # cut_after_forward: swallowed; the client side closes once the
                return True  # rival ran (closing here would let the client re-send too early)
            fault = state.swallow
            if fault is not None:  # drop_reply: the answer never reaches the client
                state.swallow = None
                self._run_between(fault)
                return False
            sink.sendall(data)
            return True
        fault = self._take(data, state)
        if fault is None:
            sink.sendall(data)
            return True
        if fault.mode == "drop_request":
            self._run_between(fault)
            return False
        if fault.mode == "drop_reply":
            state.swallow = fault
            sink.sendall(data)
            return True
        state.cut = True  # cut_after_forward: no answer passes from here on
        sink.sendall(data)
        self._run_between(fault)
        return False


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


__all__ = ["FAULT_MODES", "CountingProxy", "FaultMode", "FaultProxy"]
