"""The monitor on every installed backend, through the contract alone: the list (filtered and
paged), one execution with its timeline, the live endpoints, the dead letters, the leases —
and hostile values rendered as text on each."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable

import pytest
from harel.conformance import usable_backend_names
from harel.engine.runner import DurableRunner
from harel.model import Event
from harel.store.contract import ExecutionStore
from starlette.testclient import TestClient

OpenBackend = Callable[[str], tuple[ExecutionStore, str | None]]
Runner = Callable[[ExecutionStore], DurableRunner]

ROW_ID = re.compile(r'data-testid="execution-row" data-id="([^"]*)"')
NEXT = re.compile(r'<a href="([^"]+)" data-testid="next-page"')
PAYLOAD = "<script>window.__xss=1</script>"


def _every_row(client: TestClient, first: str) -> list[str]:
    """The ids of every page, following the "next" links from ``first``."""
    seen: list[str] = []
    page = client.get(first).text
    while True:
        seen += [html.unescape(found) for found in ROW_ID.findall(page)]
        found = NEXT.search(page)
        if found is None:
            return seen
        page = client.get(html.unescape(found.group(1))).text


@pytest.mark.parametrize("backend_name", sorted(usable_backend_names()))
def test_every_page_renders_on_the_backend(
    backend_name: str,
    open_backend: OpenBackend,
    runner_for: Runner,
    client_for: Callable[..., TestClient],
) -> None:
    store, url = open_backend(backend_name)
    runner = runner_for(store)
    ids = [runner.create("notes", execution_id=f"m-{n}").id for n in range(5)]
    runner.process("m-0", Event(kind="Note", data={"text": PAYLOAD}))
    runner.process("m-1", Event(kind="Finish"))
    client = client_for(store, url or "memory://")

    assert sorted(_every_row(client, "/?limit=2")) == ids  # every execution, page by page
    assert _every_row(client, "/?status=DONE") == ["m-1"]
    assert sorted(_every_row(client, "/?status=RUNNING&definition=notes")) == sorted(
        set(ids) - {"m-1"}
    )

    page = client.get("/executions/m-0")
    assert page.status_code == 200
    assert PAYLOAD not in page.text and html.escape(PAYLOAD, quote=False) in page.text
    assert page.text.count('data-testid="timeline-row"') == 2  # created, then the note
    assert re.search(r'data-testid="version"[^>]*>\s*2\s*<', page.text)

    assert client.get("/api/version/m-0").json()["version"] == 2
    runner.process("m-0", Event(kind="Note", data={"text": "again"}))
    assert client.get("/api/version/m-0").json()["version"] == 3  # the live poll sees it
    assert client.get("/api/summary").status_code == 200
    assert client.get("/dead-letters").status_code == 200

    # the fleet view: a worker's lease on the armed timers of one execution, by its owner
    assert 'data-testid="no-leases"' in client.get("/leases").text
    claims = store.claim("worker-<b>1</b>", time.time() + 601, lease=3600, limit=1)
    assert len(claims) == 1
    leases = client.get("/leases").text
    assert leases.count('data-testid="lease-row"') == 1
    assert "worker-&lt;b&gt;1&lt;/b&gt;" in leases and "worker-<b>" not in leases
    assert f'href="/executions/{claims[0].execution_id}"' in leases
    assert client.get("/executions/no-such").status_code == 404
