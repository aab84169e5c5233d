"""``python -m harel.demo`` (``make demo``): a durable order on the embedded SQLite store.

The order machine (``harel/examples/order.stm``) forks payment and packing into two region
executions and ships on a two-hour timer.  The store is opened by URL through the registry
(``open_store("sqlite:///...")``), as an application would.  Halfway through, the store is
closed and a NEW store object (and runner) is opened on the same file; the run continues
from disk.  The clock is simulated, so the timer fires without sleeping.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from harel.engine.actions import ActionContext
from harel.engine.definition import Definition
from harel.engine.dsl import definition_from_dsl_file
from harel.engine.runner import DurableRunner
from harel.engine.timeline import format_timeline
from harel.examples import ORDER_STM
from harel.model import Event
from harel.store.contract import ExecutionStore

START = 1_700_000_000.0


def record_payment(stm: ActionContext, event: Event | None, **_: Any) -> None:
    """``on enter`` of ``Charged``: keep the paid amount (carried to the order's join)."""
    if event is not None:
        stm.execution_ctx["amount"] = event.data.get("amount")


class SimulatedClock:
    """A clock that only moves when told to."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _open(path: Path) -> ExecutionStore:
    """The SQLite store on ``path``, opened through the registry like any configured store."""
    from harel.registry import open_store

    return open_store(f"sqlite:///{path}")


def run_demo(workdir: Path, out: TextIO = sys.stdout) -> str:
    """Run the demo in ``workdir`` (the SQLite file lives there); returns the order's outcome."""
    defn: Definition = definition_from_dsl_file(ORDER_STM)
    clock = SimulatedClock(START)
    path = workdir / "demo.db"

    def say(text: str) -> None:
        print(text, file=out)

    say(f"order machine on SQLite at {path}")
    store = _open(path)
    runner = DurableRunner(store, {defn.id: defn}, clock=clock, trace=True)
    exe = runner.create(defn.id, execution_id="order-1")
    say(f"  created {exe.id}: {exe.active_path}")
    for event in (Event(kind="Confirm"), Event(kind="Pay", data={"amount": 42.5})):
        clock.now += 60
        exe = runner.process(exe.id, event)
        say(f"  {event.kind:<8} -> {exe.active_path} ({len(exe.children)} regions)")
    store.close()
    say("  store closed; reopening a new store on the same file")

    store = _open(path)
    runner = DurableRunner(store, {defn.id: defn}, clock=clock, trace=True)
    runner.recover()
    clock.now += 60
    exe = runner.process("order-1", Event(kind="Pack"))
    say(f"  Pack     -> {exe.active_path}")
    clock.now += 7200
    fired = runner.fire_due_timers()
    exe = store.load("order-1") or exe
    say(f"  +2h: {fired} timer fired -> {exe.active_path}, {exe.status.value}/{exe.outcome}")
    say(f"  paid: {exe.context['region_results']['Fulfilment.Payment']['amount']}")

    say("timeline of order-1:")
    for line in format_timeline(store.read_trace("order-1"), since=START):
        say("  " + line)
    for child_id in exe.children:
        say(f"timeline of region {child_id}:")
        for line in format_timeline(store.read_trace(child_id), since=START):
            say("  " + line)
    store.close()
    return exe.outcome or ""


def main() -> int:
    """Entry point: run the demo in a temporary directory; 0 on success.

    Without a usable SQLite backend (or on any store error) it prints one line naming the
    problem and what to install on stderr and returns 2; Ctrl-C returns 130; no traceback."""
    from harel.store.errors import BackendError, StoreError

    try:
        with tempfile.TemporaryDirectory(prefix="harel-demo-") as tmp:
            outcome = run_demo(Path(tmp))
    except BackendError as exc:
        print(f"harel demo: the demo runs on the SQLite store: {exc}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"harel demo: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("harel demo: interrupted", file=sys.stderr)
        return 130
    return 0 if outcome == "success" else 1


if __name__ == "__main__":
    raise SystemExit(main())
