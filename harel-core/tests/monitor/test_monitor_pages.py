"""The monitor's pages on memory, SQLite and PostgreSQL: listing, search, one execution."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any

from harel.engine.runner import DurableRunner
from harel.model import Event, Status
from harel.monitor.formatting import when
from harel.store.contract import ExecutionStore
from starlette.testclient import TestClient

Runner = Callable[[ExecutionStore], DurableRunner]


def _create(runner: DurableRunner, count: int, *, finish_every: int = 0) -> list[str]:
    ids = []
    for i in range(count):
        exe = runner.create("notes", execution_id=f"exe-{i:03d}")
        if finish_every and i % finish_every == 0:
            runner.process(exe.id, Event(kind="Finish"))
        ids.append(exe.id)
    return ids


ROW_ID = re.compile(r'data-testid="execution-row" data-id="([^"]*)"')
COUNT = re.compile(r'<span class="label">(\w+)</span> <span class="value">([^<]+)</span>')
TIMER = re.compile(
    r'data-testid="timer-row"><td><code>(\w+)</code></td><td>([^<]+)</td><td>([^<]+)<'
)


def _row_ids(page: str) -> list[str]:
    return [html.unescape(found) for found in ROW_ID.findall(page)]


def test_list_pages_with_the_cursor(
    store: ExecutionStore, runner_for: Runner, client_for: Callable[..., TestClient]
) -> None:
    ids = _create(runner_for(store), 7)
    client = client_for(store)
    first = client.get("/?limit=3")
    assert first.status_code == 200
    assert _row_ids(first.text) == ids[:3]
    seen = list(_row_ids(first.text))
    page = first.text
    while 'data-testid="next-page"' in page:
        found = re.search(r'<a href="([^"]+)" data-testid="next-page"', page)
        assert found is not None
        page = client.get(html.unescape(found.group(1))).text
        seen += _row_ids(page)
    assert seen == ids
    assert client.get("/?limit=0").status_code == 400
    assert client.get("/?limit=501").status_code == 400
    assert client.get("/?cursor=not-a-cursor").status_code == 400


def test_filters_and_counts(
    store: ExecutionStore, runner_for: Runner, client_for: Callable[..., TestClient]
) -> None:
    ids = _create(runner_for(store), 6, finish_every=3)  # exe-000 and exe-003 are DONE
    client = client_for(store)
    done = client.get("/?status=DONE")
    assert _row_ids(done.text) == [ids[0], ids[3]]
    running = client.get("/?status=running&definition=notes")
    assert _row_ids(running.text) == [ids[1], ids[2], ids[4], ids[5]]
    assert _row_ids(client.get("/?definition=other").text) == []
    assert 'data-testid="no-executions"' in client.get("/?definition=other").text
    counts = dict(COUNT.findall(done.text))
    assert counts["DONE"] == "2"
    assert counts["RUNNING"] == "4"
    assert counts["FAILED"] == "0"
    assert client.get("/?status=BOGUS").status_code == 400
    assert 'data-testid="filter-form"' in done.text


def test_id_search(
    store: ExecutionStore, runner_for: Runner, client_for: Callable[..., TestClient]
) -> None:
    _create(runner_for(store), 2)
    client = client_for(store)
    found = client.get("/?q=exe-001")
    assert found.status_code == 303
    assert found.headers["location"] == "/executions/exe-001"
    missing = client.get("/?q=exe-999")
    assert missing.status_code == 200
    assert 'data-testid="not-found"' in missing.text
    assert "exe-999" in missing.text


def test_execution_page_shows_state_timers_context_and_diffs(
    store: ExecutionStore, runner_for: Runner, client_for: Callable[..., TestClient]
) -> None:
    runner = runner_for(store)
    exe = runner.create("notes", execution_id="n-1")
    runner.process(exe.id, Event(kind="Note", data={"text": "hello"}))
    runner.process(exe.id, Event(kind="Note", data={"text": "world"}))
    stored = store.load(exe.id)
    assert stored is not None
    page = client_for(store).get("/executions/n-1")
    assert page.status_code == 200, page.text
    text = page.text
    assert re.search(r'data-testid="status"[^>]*>RUNNING<', text)
    assert re.search(rf'data-testid="version">{stored.version}<', text)
    assert "<code>Open</code>" in text
    context = re.search(r'<pre class="json" id="context">(.*?)</pre>', text, re.S)
    assert context is not None
    assert json.loads(html.unescape(context.group(1))) == {"entries": 3, "last": "world"}
    assert text.count('data-testid="timer-row"') == 1
    timer = TIMER.search(text)
    assert timer is not None
    assert timer.group(1) == "Open"
    assert timer.group(2) == when(stored.armed_timers["Open"])
    assert timer.group(3).startswith("in ")
    assert text.count('data-testid="timeline-row"') == 3
    assert 'data-testid="diff-added">+ last: &#34;hello&#34;' in text
    assert 'data-testid="diff-changed">~ entries: 2 → 3' in text
    assert 'data-testid="diff-changed">~ last: &#34;hello&#34; → &#34;world&#34;' in text
    assert "<code>Open</code> → <code>Ajar</code>" in text
    assert "<code>Ajar</code> → <code>Open</code>" in text


def test_unknown_execution_is_a_404_page(
    memory_store: ExecutionStore, client_for: Callable[..., TestClient]
) -> None:
    page = client_for(memory_store).get("/executions/nope")
    assert page.status_code == 404
    assert 'data-testid="error"' in page.text
    assert client_for(memory_store).get("/api/version/nope").status_code == 404


def test_children_and_parent_links(
    memory_store: ExecutionStore, client_for: Callable[..., TestClient]
) -> None:
    from harel.engine.dsl import definition_from_dsl_file
    from harel.examples import ORDER_STM

    order = definition_from_dsl_file(ORDER_STM)
    runner = DurableRunner(memory_store, {order.id: order}, trace=True)
    runner.create(order.id, execution_id="order-1")
    runner.process("order-1", Event(kind="Confirm"))
    runner.run_until_idle()
    client = client_for(memory_store, definitions={order.id: order})
    parent = client.get("/executions/order-1").text
    children = re.findall(r'data-testid="child-row"><td><a href="/executions/([^"]+)"', parent)
    assert len(children) == 2
    child = client.get(f"/executions/{children[0]}")
    assert child.status_code == 200
    assert 'data-testid="parent"><a href="/executions/order-1">order-1</a>' in child.text


def test_live_endpoints(
    memory_store: ExecutionStore, runner_for: Runner, client_for: Callable[..., TestClient]
) -> None:
    runner = runner_for(memory_store)
    (execution_id,) = _create(runner, 1)
    client = client_for(memory_store)
    before: dict[str, Any] = client.get(f"/api/version/{execution_id}").json()
    assert before["version"] == 1
    summary = client.get("/api/summary").json()
    runner.process(execution_id, Event(kind="Note", data={"text": "x"}))
    assert client.get(f"/api/version/{execution_id}").json()["version"] == 2
    assert client.get("/api/summary").json()["fingerprint"] != summary["fingerprint"]
    page = client.get(f"/executions/{execution_id}").text
    assert f'data-poll="/api/version/{execution_id}" data-fingerprint="2"' in page
    assert client.get("/static/monitor.js").status_code == 200
    assert client.get("/static/monitor.css").status_code == 200


def test_dead_letters_page(
    memory_store: ExecutionStore, client_for: Callable[..., TestClient]
) -> None:
    from harel.engine.deadletters import DeadLetter, with_letter

    client = client_for(memory_store)
    assert 'data-testid="no-dead-letters"' in client.get("/dead-letters").text
    letter = DeadLetter(
        ref="outbox:7",
        target_id="t-<b>1</b>",
        event_kind="Pay",
        event_id="e1",
        error="ValueError: declined",
        attempts=5,
        at=1_700_000_000.0,
    )
    memory_store.commit(with_letter(None, letter), [])
    page = client.get("/dead-letters").text
    assert page.count('data-testid="dead-letter-row"') == 1
    assert "ValueError: declined" in page
    assert "t-&lt;b&gt;1&lt;/b&gt;" in page
    assert "<b>1</b>" not in page
    assert Status.FAILED.value  # the record is an execution like any other
