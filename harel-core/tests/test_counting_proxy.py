"""The loopback round-trip counter every backend's round-trip tests use."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest
from harel.conformance.proxy import CountingProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def echo_port() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _ask(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(payload)
    got = b""
    while len(got) < len(payload):
        got += sock.recv(4096)
    return got


def test_each_request_answered_is_one_round_trip(echo_port: int) -> None:
    with CountingProxy("127.0.0.1", echo_port) as proxy:
        with socket.create_connection((proxy.host, proxy.port)) as sock:
            assert _ask(sock, b"one") == b"one"
            assert proxy.round_trips == 1
            assert _ask(sock, b"two") == b"two"
            assert _ask(sock, b"three") == b"three"
        assert proxy.round_trips == 3
        assert proxy.connections == 1
        proxy.reset()
        assert proxy.round_trips == 0


def test_requests_sent_before_the_first_answer_count_once(echo_port: int) -> None:
    with CountingProxy("127.0.0.1", echo_port) as proxy:
        with socket.create_connection((proxy.host, proxy.port)) as sock:
            assert _ask(sock, b"a" * 10 + b"b" * 10) == b"a" * 10 + b"b" * 10
        assert proxy.round_trips == 1


def test_negative_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="delay"):
        CountingProxy("127.0.0.1", 1, delay=-1)
