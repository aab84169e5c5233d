"""The monitor is safe by default: escaping, the access token, secrets, guarded writes."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from harel.engine.runner import DurableRunner
from harel.model import Event, Execution, Status
from harel.monitor.access import COOKIE
from harel.monitor.settings import MonitorSetupError, check_bind, is_loopback
from harel.registry import open_store
from harel.store.contract import ExecutionStore
from harel.store.errors import StoreUnavailable
from harel.store.memory import DictStore
from starlette.testclient import TestClient

Runner = Callable[[ExecutionStore], DurableRunner]
SCRIPT = "<script>alert(1)</script>"
SECRET = "s3cr3t-pw-Zq9"


def test_store_values_render_escaped(
    memory_store: ExecutionStore, client_for: Callable[..., TestClient]
) -> None:
    odd = Execution(
        id="<b>id</b>",
        definition_id="<b>def</b>",
        status=Status.RUNNING,
        active_path="<b>state</b>",
        context={"note": SCRIPT},
    )
    memory_store.commit(odd, [])
    client = client_for(memory_store)
    for page in (client.get("/").text, client.get("/executions/%3Cb%3Eid%3C%2Fb%3E").text):
        assert "<b>" not in page
        assert "&lt;b&gt;id&lt;/b&gt;" in page
        assert "&lt;b&gt;def&lt;/b&gt;" in page
    detail = client.get("/executions/%3Cb%3Eid%3C%2Fb%3E").text
    assert SCRIPT not in detail
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail
    assert 'href="/executions/%3Cb%3Eid%3C%2Fb%3E"' in client.get("/").text
    missing = client.get("/?q=" + SCRIPT).text
    assert SCRIPT not in missing
    assert "&lt;script&gt;" in missing


def test_bind_rule() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", "a-token")
    with pytest.raises(MonitorSetupError, match="--token"):
        check_bind("0.0.0.0", None)
    with pytest.raises(MonitorSetupError, match="empty"):
        check_bind("0.0.0.0", " ")


def test_token_required_on_every_request(
    memory_store: ExecutionStore, client_for: Callable[..., TestClient]
) -> None:
    client = client_for(memory_store, token="tok-123")
    for path in ("/", "/dead-letters", "/api/summary", "/static/monitor.css"):
        refused = client.get(path)
        assert refused.status_code == 401, path
        assert "Access token needed" in refused.text or path.startswith("/static")
    assert client.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/?token=wrong").status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer tok-123"}).status_code == 200
    first = client.get("/dead-letters?token=tok-123&x=1")
    assert first.status_code == 303
    assert "token" not in first.headers["location"]
    assert first.headers["location"].endswith("/dead-letters?x=1")
    cookie = first.cookies.get(COOKIE)
    assert cookie and "tok-123" not in cookie
    assert client.get("/dead-letters").status_code == 200  # the client kept the cookie
    other = client_for(memory_store, token="tok-123")
    other.cookies.set(COOKIE, "forged")
    assert other.get("/").status_code == 401


class Unreachable(DictStore):
    """A store whose listing fails with its URL (secret included) in the message."""

    url = ""

    def list_executions(self, *args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable(f"cannot reach {self.url}: connection refused")


def test_secret_in_the_url_never_reaches_a_page(
    open_backend: Callable[[str], tuple[ExecutionStore, str | None]],
    runner_for: Runner,
    client_for: Callable[..., TestClient],
) -> None:
    _, base = open_backend("postgres")
    assert base is not None
    url = base.replace("postgres@", f"postgres:{SECRET}@", 1)
    assert SECRET in url
    store = open_store(url)
    try:
        runner_for(store).create("notes", execution_id="s-1")
        client = client_for(store, url)
        bodies = [client.get(path).text for path in ("/", "/executions/s-1", "/dead-letters")]
        bodies.append(client.get("/executions/missing").text)
        assert all(SECRET not in body for body in bodies)
        assert "***" in bodies[0]  # the redacted URL is shown
    finally:
        store.close()
    broken = Unreachable()
    broken.url = url
    page = client_for(broken, url).get("/")
    assert page.status_code == 500
    assert "StoreUnavailable" in page.text
    assert "connection refused" in page.text
    assert SECRET not in page.text
    api = client_for(broken, url).get("/api/summary")
    assert api.status_code == 500 and SECRET not in api.text


def test_writes_refused_without_the_flag(
    memory_store: ExecutionStore, runner_for: Runner, client_for: Callable[..., TestClient]
) -> None:
    runner = runner_for(memory_store)
    runner.create("notes", execution_id="w-1")
    runner.process("w-1", Event(kind="Finish"))
    client = client_for(memory_store)
    page = client.get("/executions/w-1").text
    assert 'id="purge-form"' not in page and 'id="send-form"' not in page
    assert 'name="csrf"' not in page
    for action in ("purge", "send"):
        refused = client.post(f"/actions/{action}/w-1", data={"confirm": "yes", "kind": "Note"})
        assert refused.status_code == 403
    assert memory_store.load("w-1") is not None


def test_purge_needs_confirmation_and_csrf(
    memory_store: ExecutionStore,
    runner_for: Runner,
    client_for: Callable[..., TestClient],
    csrf_of: Callable[[str], str],
) -> None:
    runner = runner_for(memory_store)
    runner.create("notes", execution_id="p-1")
    runner.create("notes", execution_id="p-2")  # stays RUNNING
    runner.process("p-1", Event(kind="Finish"))
    client = client_for(memory_store, allow_writes=True)
    page = client.get("/executions/p-1").text
    assert 'id="purge-form"' in page
    assert 'id="purge-form"' not in client.get("/executions/p-2").text
    csrf = csrf_of(page)
    assert client.post("/actions/purge/p-1", data={"confirm": "yes"}).status_code == 403
    bad = client.post("/actions/purge/p-1", data={"confirm": "yes", "csrf": "x" + csrf})
    assert bad.status_code == 403
    confirm = client.post("/actions/purge/p-1", data={"csrf": csrf})
    assert confirm.status_code == 200
    assert 'name="confirm" value="yes"' in confirm.text
    assert memory_store.load("p-1") is not None  # nothing done before the confirmation
    done = client.post("/actions/purge/p-1", data={"csrf": csrf, "confirm": "yes"})
    assert done.status_code == 303
    assert memory_store.load("p-1") is None
    notice = client.get(done.headers["location"]).text
    assert '<p class="notice" data-testid="notice">p-1 purged</p>' in notice
    assert memory_store.export_execution("p-1") is None
    active = client.post("/actions/purge/p-2", data={"csrf": csrf, "confirm": "yes"})
    assert active.status_code == 409
    assert memory_store.load("p-2") is not None


def test_a_crafted_notice_link_shows_nothing(
    memory_store: ExecutionStore, runner_for: Runner, client_for: Callable[..., TestClient]
) -> None:
    """Only notices this process sealed are shown: a link cannot put its own words on a page."""
    runner_for(memory_store).create("notes", execution_id="n-1")
    client = client_for(memory_store)
    for path in ("/", "/executions/n-1"):
        for query in ("?notice=Call+555-0100", "?notice=Call+555-0100&seal=" + "0" * 64):
            page = client.get(path + query).text
            assert "555-0100" not in page and 'data-testid="notice"' not in page


def test_send_goes_through_the_runner(
    memory_store: ExecutionStore,
    runner_for: Runner,
    client_for: Callable[..., TestClient],
    csrf_of: Callable[[str], str],
) -> None:
    runner_for(memory_store).create("notes", execution_id="e-1")
    client = client_for(memory_store, allow_writes=True)
    csrf = csrf_of(client.get("/executions/e-1").text)
    form = {"csrf": csrf, "kind": "Note", "data": '{"text": "via web"}', "event_id": "ev-1"}
    confirm = client.post("/actions/send/e-1", data=form)
    assert confirm.status_code == 200 and 'value="yes"' in confirm.text
    assert memory_store.load("e-1").version == 1  # type: ignore[union-attr]
    sent = client.post("/actions/send/e-1", data={**form, "confirm": "yes"})
    assert sent.status_code == 303
    assert 'data-testid="notice"' in client.get(sent.headers["location"]).text
    exe = memory_store.load("e-1")
    assert exe is not None and exe.active_path == "Ajar" and exe.context["last"] == "via web"
    again = client.post("/actions/send/e-1", data={**form, "confirm": "yes"})
    assert "already" in again.headers["location"]
    assert memory_store.load("e-1").version == exe.version  # type: ignore[union-attr]
    unknown = client.post("/actions/send/e-1", data={**form, "kind": "Nope", "confirm": "yes"})
    assert unknown.status_code == 400
    assert re.search(r"declares no event", unknown.text)
    bad_json = client.post("/actions/send/e-1", data={**form, "data": "{", "confirm": "yes"})
    assert bad_json.status_code == 400
