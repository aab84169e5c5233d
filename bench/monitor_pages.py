"""``harel monitor`` page times on a large store (issue 21; not a test, it asserts nothing).

Fills a SQLite file with ``--executions`` executions (default 100,000: imported one atomic
write each, statuses and definitions mixed) and one execution of the ``notes`` machine whose
trace holds ``--steps`` steps (default 10,000: three real steps through the runner, the record
re-imported with its trace grown), then times through starlette's TestClient:

* the list page, first request of a fresh monitor (the bounded counts by status computed)
  and warm (counts reused for 5 s, one ``list_executions`` page);
* a filtered list page (definition + status), cold and warm; a page deep in the listing;
* the execution page of the long-trace execution (newest 100 of its steps) and an older
  window of it; the live endpoints.

Each figure is the median of ``--reps`` requests, in ms.  Usage::

    python bench/monitor_pages.py [--executions 100000] [--steps 10000] [--reps 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harel.engine.dsl import definition_from_dsl
from harel.engine.runner import DurableRunner
from harel.model import Event, Execution, Status
from harel.monitor.app import create_app
from harel.monitor.settings import MonitorSettings
from harel.registry import open_store
from harel.store.contract import ExecutionRecord, ExecutionStore
from starlette.testclient import TestClient

NOTES = """
event Note { text: string }
machine notes {
  initial Open
  state Open { timeout 600 }
  state Ajar { timeout 600 }
  from Open to Ajar on Note
  from Ajar to Open on Note
}
"""
STATUSES = (Status.RUNNING,) * 7 + (Status.DONE,) * 2 + (Status.FAILED,)
"""70 % running, 20 % done, 10 % failed."""


def fill(store: ExecutionStore, count: int) -> float:
    """Import ``count`` small executions; returns executions per second."""
    now = time.time()
    started = time.perf_counter()
    for n in range(count):
        exe = Execution(
            id=f"x{n:07d}",
            definition_id=f"machine-{n % 4}",
            status=STATUSES[n % len(STATUSES)],
            active_path="Main.Waiting",
            context={"n": n, "payload": "x" * 100},
            version=1,
        )
        store.import_execution(ExecutionRecord(execution_id=exe.id, execution=exe, updated_at=now))
    return count / (time.perf_counter() - started)


def long_trace(store: ExecutionStore, steps: int) -> str:
    """One ``notes`` execution with ``steps`` trace steps; its id."""
    defn = definition_from_dsl(NOTES, "notes")
    runner = DurableRunner(store, {defn.id: defn}, trace=True)
    runner.create(defn.id, execution_id="seed")
    for text in ("a", "b"):
        runner.process("seed", Event(kind="Note", data={"text": text}))
    record = store.export_execution("seed")
    assert record is not None and record.execution is not None
    template = record.trace[-1]
    trace = tuple(
        {**template, "index": i, "context_out": {"i": i, "last": f"note {i}"}} for i in range(steps)
    )
    exe = record.execution.model_copy(update={"id": "long"})
    store.import_execution(
        dataclasses.replace(record, execution_id="long", execution=exe, processed=(), trace=trace)
    )
    return "long"


def median_ms(call: Callable[[], object], reps: int) -> float:
    """The median time of ``reps`` calls, in ms."""
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def fresh_client(store: ExecutionStore, url: str) -> TestClient:
    """A new monitor (empty count cache) over ``store``."""
    return TestClient(create_app(store, MonitorSettings(store_label=url)))


def measure(store: ExecutionStore, url: str, reps: int, steps: int) -> list[tuple[str, float]]:
    """The figures, in ms."""

    def get(client: TestClient, path: str) -> None:
        response = client.get(path)
        if response.status_code != 200:
            raise SystemExit(f"{path}: HTTP {response.status_code}")

    client = fresh_client(store, url)
    get(client, "/")  # warm the process (imports, templates)
    filtered = "/?definition=machine-1&status=FAILED"
    deep = client.get("/?limit=500").text
    cursor = deep.split('data-testid="next-page"')[0].rsplit('href="', 1)[-1].split('"')[0]
    figures = [
        (
            "list page, fresh monitor (counts computed)",
            median_ms(lambda: get(fresh_client(store, url), "/"), reps),
        ),
        ("list page, warm (counts reused)", median_ms(lambda: get(client, "/"), reps)),
        (
            "filtered list page, fresh monitor",
            median_ms(lambda: get(fresh_client(store, url), filtered), reps),
        ),
        ("filtered list page, warm", median_ms(lambda: get(client, filtered), reps)),
        (
            "second page of 500 (keyset cursor), warm",
            median_ms(lambda: get(client, cursor.replace("&amp;", "&")), reps),
        ),
        (
            f"execution page, {steps:,}-step trace (newest 100 rows)",
            median_ms(lambda: get(client, "/executions/long"), reps),
        ),
        (
            "execution page, an older window",
            median_ms(lambda: get(client, f"/executions/long?before={steps // 2}"), reps),
        ),
        ("id search (redirect)", median_ms(lambda: client.get("/?q=x0050000"), reps)),
        ("live: /api/version/long", median_ms(lambda: get(client, "/api/version/long"), reps)),
        ("live: /api/summary", median_ms(lambda: get(client, "/api/summary"), reps)),
    ]
    return figures


def main() -> None:
    """Fill, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", type=Path, help="where the SQLite file goes (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = (args.dir or Path(scratch)) / "monitor-bench.db"
        path.unlink(missing_ok=True)
        url = f"sqlite:///{path}?synchronous=NORMAL&trace_max={args.steps + 10}"
        store = open_store(url)
        try:
            rate = fill(store, args.executions)
            long_trace(store, args.steps)
            print(
                f"harel monitor pages on SQLite: {args.executions:,} executions "
                f"(imported at {rate:,.0f}/s) + one with a {args.steps:,}-step trace; "
                f"median of {args.reps} requests through TestClient"
            )
            for label, ms in measure(store, url, args.reps, args.steps):
                print(f"  {label:<55} {ms:8.1f} ms")
        finally:
            store.close()


if __name__ == "__main__":
    main()
