"""A long trace renders as a capped window, with links to older and newer steps."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from harel.engine.runner import DurableRunner
from harel.model import Event
from harel.monitor.timeline import TIMELINE_ROWS, context_diff, window
from harel.store.contract import ExecutionStore
from starlette.testclient import TestClient

Runner = Callable[[ExecutionStore], DurableRunner]
STEPS = 10_000


def _long_trace(store: ExecutionStore, runner: DurableRunner) -> None:
    """``long``: a real run of three steps, re-imported with its trace grown to STEPS."""
    runner.create("notes", execution_id="seed")
    runner.process("seed", Event(kind="Note", data={"text": "a"}))
    runner.process("seed", Event(kind="Note", data={"text": "b"}))
    record = store.export_execution("seed")
    assert record is not None and record.execution is not None and len(record.trace) == 3
    template = record.trace[-1]
    trace = tuple(
        {**template, "index": i, "context_out": {"entries": i, "last": f"n{i}"}}
        for i in range(STEPS)
    )
    exe = record.execution.model_copy(update={"id": "long"})
    store.import_execution(
        dataclasses.replace(record, execution_id="long", execution=exe, processed=(), trace=trace)
    )


def test_ten_thousand_steps_render_a_capped_window(
    store: ExecutionStore,
    runner_for: Runner,
    client_for: Callable[..., TestClient],
    count_rows: Callable[[str, str], int],
) -> None:
    runner = runner_for(store)
    _long_trace(store, runner)
    assert len(store.read_trace("long")) == STEPS
    client = client_for(store)
    newest = client.get("/executions/long").text
    assert count_rows(newest, "timeline-row") == TIMELINE_ROWS
    indices = [int(x) for x in re.findall(r'data-testid="timeline-row" data-index="(\d+)"', newest)]
    assert indices == list(range(STEPS - TIMELINE_ROWS, STEPS))
    assert f"{TIMELINE_ROWS} of {STEPS} step(s)" in newest
    older = re.search(r'href="\?before=(\d+)" data-testid="older-steps"', newest)
    assert older is not None and int(older.group(1)) == STEPS - TIMELINE_ROWS
    page = client.get(f"/executions/long?before={older.group(1)}").text
    assert count_rows(page, "timeline-row") == TIMELINE_ROWS
    assert 'data-testid="newer-steps"' in page
    oldest = client.get("/executions/long?before=50").text
    assert count_rows(oldest, "timeline-row") == 50
    assert 'data-testid="older-steps"' not in oldest
    assert client.get("/executions/long?before=x").status_code == 400


def test_window_diffs_against_the_step_before_the_window() -> None:
    steps = [{"index": i, "context_out": {"n": i}} for i in range(10)]
    shown = window(steps, before=5, size=2)
    assert [row.index for row in shown.rows] == [3, 4]
    assert shown.rows[0].diff is not None and shown.rows[0].diff.changed == {"n": (2, 3)}
    assert shown.older == 3 and shown.newer == 7 and shown.total == 10
    assert window(steps, before=8, size=2).newer == -1
    assert window(steps, size=2).newer is None
    first = window(steps, before=1, size=5).rows[0]
    assert first.diff is not None and first.diff.added == {"n": 0}
    assert window([{"index": 0}], size=5).rows[0].diff is None


def test_context_diff() -> None:
    diff = context_diff({"a": 1, "b": 2, "c": [1]}, {"b": 3, "c": [1], "d": None})
    assert diff.added == {"d": None}
    assert diff.removed == {"a": 1}
    assert diff.changed == {"b": (2, 3)}
    assert context_diff({"x": 1}, {"x": 1}).empty
