"""The other process of the kit's capability checks, run as ``python -m harel.conformance._remote``.

It opens the store under test *through the registry* (``open_store`` / ``open_async_store`` on
the URL in the environment variable :data:`URL_VAR`, never on the command line), exactly as an
application in another process would, and prints one JSON document on stdout:

* ``dump IDS EVENT_IDS WRITE_ID`` prints :func:`dump_plan`'s reading of the dataset, then
  inserts execution ``WRITE_ID`` (so the kit can read back what a process that has exited
  wrote) — the ``persistent`` check;
* ``race EXECUTION_ID TAG COMMITS FLAVOUR`` prints ``ready``, waits for ``go`` on stdin, then
  commits ``COMMITS`` steps to one execution (reloading and retrying after every
  :class:`~harel.store.errors.StoreConflict`) and prints the versions it won — the
  ``multi_process`` check.

The readings and the race are sans-IO plans (they yield store calls), so the kit runs the very
same code in its own process through either flavour.  Imports neither pytest nor hypothesis.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Generator, Sequence
from typing import Any

from harel.model import Event, Execution
from harel.store.common.drive import adrive, drive
from harel.store.contract import StoreConflict, TimerOp

URL_VAR = "HAREL_KIT_STORE_URL"
"""The environment variable that carries the store URL to the other process."""

FAR_FUTURE = 1e18
WRITTEN_BY = "another process"

Call = tuple[str, tuple[Any, ...], dict[str, Any]]
"""A store method call: name, positional and keyword arguments."""

CallPlan = Generator[Call, Any, Any]


THINK = 0.002
"""Seconds a racer holds its loaded copy before committing (so the racers interleave)."""


def call(store: Any, request: Call) -> Any:
    """Make one store call (sync store: the result; async store: an awaitable)."""
    method, args, kwargs = request
    return getattr(store, method)(*args, **kwargs)


def sync_call(store: Any, request: Call) -> Any:
    """:func:`call` on a sync store; ``pause`` sleeps."""
    if request[0] == "pause":
        time.sleep(*request[1])
        return None
    return call(store, request)


async def async_call(store: Any, request: Call) -> Any:
    """:func:`call` on an async store, awaited; ``pause`` sleeps without blocking the loop."""
    if request[0] == "pause":
        await asyncio.sleep(*request[1])
        return None
    return await call(store, request)


def dump_plan(ids: Sequence[str], event_ids: Sequence[str]) -> CallPlan:
    """Read everything observable about ``ids`` and the relays, as JSON-ready values."""
    executions: dict[str, Any] = {}
    for execution_id in ids:
        loaded = yield ("load", (execution_id,), {})
        marks = {}
        for event_id in event_ids:
            marks[event_id] = yield ("is_processed", (execution_id, event_id), {})
        executions[execution_id] = {
            "execution": None if loaded is None else loaded.model_dump(mode="json"),
            "trace": (yield ("read_trace", (execution_id,), {})),
            "processed": marks,
        }
    summaries: list[Any] = []
    cursor: str | None = None
    while True:
        page = yield ("list_executions", (), {"limit": 7, "cursor": cursor})
        summaries.extend(item.model_dump(mode="json") for item in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    outbox = yield ("pending_outbox", (), {})
    spawns = yield ("pending_spawns", (), {})
    timers = yield ("due_timers", (FAR_FUTURE,), {})
    return json.loads(
        json.dumps(
            {
                "executions": executions,
                "summaries": summaries,
                "outbox": [[e.seq, e.target_id, e.event.model_dump(mode="json")] for e in outbox],
                "spawns": [
                    [s.seq, s.parent_id, s.child_id, s.root_path, s.context] for s in spawns
                ],
                "timers": [list(timer) for timer in timers],
            }
        )
    )


def race_step(exe: Execution, tag: str, k: int) -> dict[str, Any]:
    """The effects of the ``k``-th step committed by racer ``tag`` (its ids are unique)."""
    name = f"{tag}-{k}"
    return {
        "emits": [(None, Event(id=f"out-{name}", kind="Raced", data={"by": tag}))],
        "processed_event_id": f"in-{name}",
        "timers": (TimerOp.schedule(f"/t/{tag}", float(k)),),
        "trace": {"event_kind": "Raced", "tag": tag, "k": k, "version": exe.version + 1},
    }


def race_plan(execution_id: str, tag: str, commits: int) -> CallPlan:
    """Commit ``commits`` steps, retrying lost CAS rounds; the versions won and the losses.

    A :class:`StoreConflict` raised by a commit is thrown back into the plan (that is what
    :func:`~harel.store.author.drive` does) and answered by a reload.
    """
    won: list[int] = []
    conflicts = 0
    for k in range(commits):
        while True:
            exe = yield ("load", (execution_id,), {})
            if exe is None:
                raise RuntimeError(f"{execution_id!r} vanished during the race")
            exe.context.setdefault("log", []).append(f"{tag}-{k}")
            yield ("pause", (THINK,), {})  # hold the copy a moment: the other racer gets in
            try:
                yield ("commit", (exe,), race_step(exe, tag, k))
            except StoreConflict:
                conflicts += 1
                continue
            won.append(exe.version)
            break
    return {"won": won, "conflicts": conflicts}


def _wait_for_go() -> None:
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("the kit did not start the race")


def _race(url: str, execution_id: str, tag: str, commits: int, flavour: str) -> Any:
    from harel.registry import open_async_store, open_store

    plan = race_plan(execution_id, tag, commits)
    if flavour == "sync":
        store = open_store(url)
        try:
            store.load(execution_id)  # warm: the race starts with a connection in use
            _wait_for_go()
            return drive(plan, lambda request: sync_call(store, request))
        finally:
            store.close()

    async def main() -> Any:
        astore = await open_async_store(url)
        try:
            await astore.load(execution_id)
            _wait_for_go()
            return await adrive(plan, lambda request: async_call(astore, request))
        finally:
            await astore.close()

    return asyncio.run(main())


def _dump(url: str, ids: list[str], event_ids: list[str], write_id: str) -> Any:
    from harel.registry import open_store

    store = open_store(url)
    try:
        reading = drive(dump_plan(ids, event_ids), lambda request: call(store, request))
        store.save(
            Execution(id=write_id, definition_id="kit.elsewhere", context={"by": WRITTEN_BY})
        )
        return reading
    finally:
        store.close()


def main(argv: Sequence[str]) -> int:
    """Entry point (see the module docstring)."""
    url = os.environ.get(URL_VAR)
    if not url:
        raise SystemExit(f"{URL_VAR} is not set")
    command, *rest = argv
    if command == "dump":
        result = _dump(url, json.loads(rest[0]), json.loads(rest[1]), rest[2])
    elif command == "race":
        execution_id, racer, commits, flavour = rest
        result = _race(url, execution_id, racer, int(commits), flavour)
    else:
        raise SystemExit(f"unknown command {command!r}")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
