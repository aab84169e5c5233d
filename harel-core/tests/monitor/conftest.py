"""Fixtures of the monitor tests: a small machine, stores over real backends, a client."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from harel.engine.definition import Definition
from harel.engine.dsl import definition_from_dsl
from harel.engine.runner import DurableRunner
from harel.model import Event
from harel.monitor.app import create_app
from harel.monitor.settings import MonitorSettings
from harel.store.common.urls import redact_url
from harel.store.contract import ExecutionStore
from starlette.testclient import TestClient

OpenBackend = Callable[[str], tuple[ExecutionStore, str | None]]

NOTES = """
event Note { text: string }
event Finish {}
machine notes {
  initial Open
  state Open { on enter remember  timeout 600 }
  state Ajar { on enter remember  timeout 600 }
  final Closed success {}
  from Open to Ajar on Note
  from Ajar to Open on Note
  from Open to Closed on Finish
  from Ajar to Closed on Finish
}
"""
"""A machine whose every note changes its context and re-arms a timer."""


def remember(stm: Any, event: Event | None, **_: Any) -> None:
    """``on enter Open``: count the entries, keep the last note's text."""
    stm.execution_ctx["entries"] = stm.execution_ctx.get("entries", 0) + 1
    if event is not None and "text" in event.data:
        stm.execution_ctx["last"] = event.data["text"]


@pytest.fixture
def notes() -> Definition:
    """The ``notes`` machine."""
    return definition_from_dsl(NOTES, "notes", actions={"remember": remember})


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    """The backends the main page tests run on: in process, a file, a server."""
    name: str = request.param
    return name


@pytest.fixture
def store(open_backend: OpenBackend, backend: str) -> ExecutionStore:
    """A fresh store of ``backend``."""
    return open_backend(backend)[0]


@pytest.fixture
def memory_store(open_backend: OpenBackend) -> ExecutionStore:
    """A fresh memory store (for the tests whose subject is not the backend)."""
    return open_backend("memory")[0]


@pytest.fixture
def runner_for(notes: Definition) -> Callable[[ExecutionStore], DurableRunner]:
    """``runner_for(store)``: a tracing runner of the ``notes`` machine over ``store``."""

    def make(store: ExecutionStore) -> DurableRunner:
        return DurableRunner(store, {notes.id: notes}, trace=True, trace_max=20_000)

    return make


@pytest.fixture
def client_for(notes: Definition) -> Callable[..., TestClient]:
    """``client_for(store, **settings)``: a TestClient of the monitor over ``store``."""

    def make(store: ExecutionStore, url: str = "memory://", **settings: Any) -> TestClient:
        settings.setdefault("definitions", {notes.id: notes})
        monitor = MonitorSettings(store_label=redact_url(url), **settings)
        return TestClient(create_app(store, monitor), follow_redirects=False)

    return make


_TESTID = re.compile(r'data-testid="([a-z-]+)"')


@pytest.fixture
def count_rows() -> Callable[[str, str], int]:
    """``count_rows(html, testid)``: how many elements carry ``data-testid=testid``."""

    def count(html: str, testid: str) -> int:
        return sum(1 for found in _TESTID.finditer(html) if found.group(1) == testid)

    return count


@pytest.fixture
def csrf_of() -> Callable[[str], str]:
    """``csrf_of(html)``: the CSRF secret in a rendered form."""

    def find(html: str) -> str:
        found = re.search(r'name="csrf" value="([^"]+)"', html)
        assert found is not None, "no CSRF field on the page"
        return found.group(1)

    return find
