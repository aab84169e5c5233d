"""The leases page: which worker holds which lease and until when, through ``list_leases``."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from harel.model import Execution, Status
from harel.store.contract import ExecutionStore, TimerOp
from harel.store.memory import DictStore
from starlette.testclient import TestClient

OpenBackend = Callable[[str], tuple[ExecutionStore, str | None]]

LEASE = 600.0
OWNER_CELL = re.compile(r'data-testid="lease-owner"><code>([^<]*)</code>')


def _due(store: ExecutionStore, execution_id: str) -> None:
    """An execution with a timer due long ago (claimable at once)."""
    exe = Execution(id=execution_id, definition_id="notes", status=Status.RUNNING)
    store.commit(exe, [], timers=[TimerOp.schedule("/t", 1.0)])


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_the_page_shows_who_holds_which_lease_until_when(
    open_backend: OpenBackend, backend: str, client_for: Callable[..., TestClient]
) -> None:
    store, _ = open_backend(backend)
    client = client_for(store)
    empty = client.get("/leases")
    assert empty.status_code == 200
    assert 'data-testid="no-leases"' in empty.text and 'id="nav-leases"' in empty.text
    for name in ("exe-a", "exe-b"):
        _due(store, name)
    now = time.time()
    store.claim("worker-1", now, lease=LEASE, limit=1)
    store.claim("worker-2", now, lease=LEASE / 2, limit=1)
    page = client.get("/leases").text
    assert page.count('data-testid="lease-row"') == 2
    # earliest expiry first, as the store returned them
    assert OWNER_CELL.findall(page) == ["worker-2", "worker-1"]
    assert '<a href="/executions/exe-b">exe-b</a>' in page
    assert "in 5 min" in page and "in 10 min" in page
    assert client.get("/leases?limit=1").text.count('data-testid="lease-row"') == 1
    for bad in ("0", "501", "many"):
        assert client.get(f"/leases?limit={bad}").status_code == 400


def test_owner_and_id_render_escaped(
    memory_store: ExecutionStore, client_for: Callable[..., TestClient]
) -> None:
    _due(memory_store, "<b>id</b>")
    memory_store.claim("<b>x</b>", time.time(), lease=LEASE)
    page = client_for(memory_store).get("/leases").text
    assert "<b>" not in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "&lt;b&gt;id&lt;/b&gt;" in page
    assert 'href="/executions/%3Cb%3Eid%3C%2Fb%3E"' in page


def test_the_live_endpoint_follows_the_leases(
    memory_store: ExecutionStore, client_for: Callable[..., TestClient]
) -> None:
    client = client_for(memory_store)
    before: dict[str, Any] = client.get("/api/leases").json()
    assert before["leases"] == 0
    _due(memory_store, "exe-a")
    memory_store.claim("worker-1", time.time(), lease=LEASE)
    after: dict[str, Any] = client.get("/api/leases").json()
    assert after["leases"] == 1 and after["fingerprint"] != before["fingerprint"]
    page = client.get("/leases?limit=7").text
    assert 'data-poll="/api/leases?limit=7"' in page
    assert f'data-fingerprint="{client.get("/api/leases?limit=7").json()["fingerprint"]}"' in page
    memory_store.release("worker-1", "exe-a")
    assert client.get("/api/leases").json() == before


class _NoLeases:
    """A store written before ``list_leases`` existed (everything else passed on)."""

    def __init__(self, inner: ExecutionStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "list_leases":
            raise AttributeError(name)
        return getattr(self.inner, name)


def test_a_store_without_list_leases_gets_a_note(client_for: Callable[..., TestClient]) -> None:
    client = client_for(_NoLeases(DictStore()))
    page = client.get("/leases")
    assert page.status_code == 200
    assert 'data-testid="no-list-leases"' in page.text
    assert client.get("/api/leases").json()["leases"] is None
