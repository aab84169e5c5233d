"""The fault-injecting proxy behind the kit's lost-reply tests."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest
from harel.conformance.proxy import FaultProxy


class _Recorder(socketserver.BaseRequestHandler):
    """Echoes every chunk and records what reached it."""

    received: list[bytes]
    lock = threading.Lock()

    def handle(self) -> None:
        while data := self.request.recv(4096):
            with self.lock:
                type(self).received.append(data)
            self.request.sendall(b"ok:" + data)


@pytest.fixture
def server() -> Iterator[tuple[int, list[bytes]]]:
    received: list[bytes] = []
    handler = type("Handler", (_Recorder,), {"received": received})
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True).start()
    yield srv.server_address[1], received
    srv.shutdown()
    srv.server_close()


def _ask(proxy: FaultProxy, payload: bytes) -> bytes:
    """Send ``payload`` on a new connection; the answer, or b'' when the connection was cut."""
    with socket.create_connection((proxy.host, proxy.port), timeout=5) as sock:
        sock.sendall(payload)
        answer = b""
        try:
            while len(answer) < len(payload) + 3:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
        except ConnectionResetError:
            pass
        return answer


def _wait_received(received: list[bytes], payload: bytes) -> bool:
    for _ in range(200):
        if payload in received:
            return True
        threading.Event().wait(0.01)
    return False


def test_drop_request_never_reaches_the_server(server: tuple[int, list[bytes]]) -> None:
    port, received = server
    ran: list[str] = []
    with FaultProxy("127.0.0.1", port) as proxy:
        proxy.arm("drop_request", marker=b"MARK", between=lambda: ran.append("between"))
        assert _ask(proxy, b"plain") == b"ok:plain"  # no marker: untouched
        assert _ask(proxy, b"x-MARK-y") == b""
        assert proxy.fired and ran == ["between"]
        assert _ask(proxy, b"x-MARK-y") == b"ok:x-MARK-y"  # one-shot
    assert received.count(b"x-MARK-y") == 1


def test_drop_reply_reaches_the_server_and_swallows_the_answer(
    server: tuple[int, list[bytes]],
) -> None:
    port, received = server
    with FaultProxy("127.0.0.1", port) as proxy:
        proxy.arm("drop_reply", marker=b"MARK")
        assert _ask(proxy, b"MARK-1") == b""
        assert proxy.fired
    assert received == [b"MARK-1"]


def test_cut_after_forward_forwards_then_cuts(server: tuple[int, list[bytes]]) -> None:
    port, received = server
    with FaultProxy("127.0.0.1", port) as proxy:
        proxy.arm("cut_after_forward", marker=b"MARK")
        assert _ask(proxy, b"MARK-2") == b""
        assert proxy.fired
        assert _wait_received(received, b"MARK-2")


def test_a_failing_between_is_reported_not_fatal(server: tuple[int, list[bytes]]) -> None:
    port, _ = server

    def boom() -> None:
        raise RuntimeError("rival failed")

    with FaultProxy("127.0.0.1", port) as proxy:
        proxy.arm("drop_request", marker=b"MARK", between=boom)
        assert _ask(proxy, b"MARK") == b""
        assert isinstance(proxy.between_error, RuntimeError)
        assert _ask(proxy, b"after") == b"ok:after"


def test_down_refuses_until_up(server: tuple[int, list[bytes]]) -> None:
    port, _ = server
    with FaultProxy("127.0.0.1", port) as proxy:
        proxy.down()
        assert _ask(proxy, b"while-down") == b""
        proxy.up()
        assert _ask(proxy, b"back") == b"ok:back"


def test_bad_arm_is_refused() -> None:
    proxy = FaultProxy("127.0.0.1", 1)
    try:
        with pytest.raises(ValueError, match="mode"):
            proxy.arm("explode", marker=b"x")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="marker"):
            proxy.arm("drop_reply", marker=b"")
    finally:
        proxy.stop()
