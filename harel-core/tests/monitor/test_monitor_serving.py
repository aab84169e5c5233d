"""How the monitor serves: a slow store never blocks the event loop, the chart hook, headers."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Collection
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest
from harel.engine.definition import Definition
from harel.engine.runner import DurableRunner
from harel.monitor.app import create_app
from harel.monitor.settings import MonitorSettings
from harel.store.contract import ExecutionStore
from harel.store.memory import DictStore
from starlette.testclient import TestClient

Runner = Callable[[ExecutionStore], DurableRunner]


@pytest.fixture
def anyio_backend() -> str:
    """These tests run under asyncio (the loop uvicorn runs the monitor on)."""
    return "asyncio"


class SlowStore(DictStore):
    """A store whose listing hangs until the test releases it."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def list_executions(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        if not self.release.wait(60):
            raise TimeoutError("the test never released the listing")
        return super().list_executions(*args, **kwargs)


@pytest.mark.anyio
async def test_a_slow_store_call_does_not_block_other_requests() -> None:
    store = SlowStore()
    app = create_app(store, MonitorSettings(store_label="memory://"))
    answers: dict[str, httpx2.Response] = {}
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://monitor") as client:

        async def list_page() -> None:
            answers["list"] = await client.get("/api/summary")

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(list_page)
            await anyio.to_thread.run_sync(store.entered.wait)  # the listing hangs in its thread
            css = await client.get("/static/monitor.css")  # answered meanwhile
            assert css.status_code == 200
            assert "list" not in answers
            store.release.set()
    assert answers["list"].status_code == 200


def test_the_chart_is_drawn_when_the_definition_is_known(
    memory_store: ExecutionStore,
    runner_for: Runner,
    client_for: Callable[..., TestClient],
) -> None:
    runner_for(memory_store).create("notes", execution_id="c-1")
    page = client_for(memory_store).get("/executions/c-1").text
    assert 'data-testid="chart"' in page and "<svg" in page
    assert re.search(r'<g class="[^"]*\bactive\b[^"]*" data-path="Open"', page)
    without = client_for(memory_store, definitions={}).get("/executions/c-1").text
    assert 'data-testid="chart"' not in without and "<svg" not in without


def test_a_failing_chart_leaves_the_page_up(
    monkeypatch: pytest.MonkeyPatch,
    memory_store: ExecutionStore,
    runner_for: Runner,
    client_for: Callable[..., TestClient],
) -> None:
    def render_svg(definition: Definition, active: Collection[str]) -> str:
        raise ValueError("cannot lay out <this>")

    monkeypatch.setattr("harel.monitor.pages.render_svg", render_svg)
    runner_for(memory_store).create("notes", execution_id="c-2")
    page = client_for(memory_store).get("/executions/c-2")
    assert page.status_code == 200
    assert "the chart could not be drawn (ValueError: cannot lay out &lt;this&gt;)" in page.text


def test_security_headers(
    memory_store: ExecutionStore, client_for: Callable[..., TestClient]
) -> None:
    for path in ("/", "/nope-not-a-route", "/static/monitor.js"):
        response = client_for(memory_store).get(path)
        policy = response.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "script-src" not in policy  # no inline JS
        assert "frame-ancestors 'none'" in policy
        assert response.headers["x-content-type-options"] == "nosniff"
