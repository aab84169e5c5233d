"""Commit throughput of ``AsyncRqliteStore`` against ``RqliteStore``, side by side in one run.

A fake rqlite node (:mod:`harel_testing.rqlite`) runs in a separate process, so
the node's own Python does not compete with the clients for this interpreter's GIL.  Round
after round, each variant commits state-only steps for ``--seconds``:

* ``sync``: one ``RqliteStore``, one loop, each commit on the same execution;
* ``async xN``: one ``AsyncRqliteStore`` shared by ``--tasks`` asyncio tasks, each task
  committing to an execution of its own (plus ``async x1``: one task).

With ``--bare`` it also times bare HTTP calls to the same node (one ``POST /db/query`` of
``SELECT 1``): ``httpx.Client`` in a loop against ``httpx.AsyncClient`` shared by the same
number of tasks — why the async store is not built on ``httpx.AsyncClient``.

Prints calls per second per variant (summed over the rounds) and the ratio to ``sync``; issue
10's target is ``async ÷ sync >= 0.8``.  Run from the workspace root::

    .venv/bin/python harel-store-rqlite/bench/async_vs_sync.py [--bare]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from harel.model import Execution
from harel_store_rqlite import AsyncRqliteStore, RqliteStore

NODE = """
import sys
from harel_testing.rqlite import FakeRqlite
node = FakeRqlite(sys.argv[1]).start()
print(node.url, flush=True)
sys.stdin.read()
node.close()
"""

AsyncOpener = Callable[[str], Awaitable[Any]]
ASYNC_VARIANTS: dict[str, AsyncOpener] = {"async": AsyncRqliteStore.open}
"""The async stores measured (a name and how to open one on a node URL)."""


@contextmanager
def fake_node(workdir: Path) -> Iterator[str]:
    """A fake rqlite node in a child process; yields its store URL."""
    child = subprocess.Popen(
        [sys.executable, "-c", NODE, str(workdir / "node.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        yield child.stdout.readline().strip()
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)


def sync_round(store: RqliteStore, exe: Execution, seconds: float) -> tuple[int, float]:
    """Commit ``exe`` in a loop for ``seconds``: (commits, elapsed)."""
    count, started = 0, time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        exe.context["n"] = count
        store.commit(exe, [])
        count += 1
    return count, time.perf_counter() - started


async def async_round(store: Any, exes: list[Execution], seconds: float) -> tuple[int, float]:
    """One task per execution, each committing in a loop for ``seconds``: (commits, elapsed)."""
    started = time.perf_counter()
    deadline = started + seconds

    async def task(exe: Execution) -> int:
        count = 0
        while time.perf_counter() < deadline:
            exe.context["n"] = count
            await store.commit(exe, [])
            count += 1
        return count

    counts = await asyncio.gather(*(task(exe) for exe in exes))
    return sum(counts), time.perf_counter() - started


QUERY = b'["SELECT 1"]'


def bare_sync_round(client: httpx.Client, seconds: float) -> tuple[int, float]:
    """Bare ``httpx.Client`` POSTs in a loop for ``seconds``: (calls, elapsed)."""
    count, started = 0, time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        client.post("/db/query", content=QUERY).raise_for_status()
        count += 1
    return count, time.perf_counter() - started


async def bare_async_round(
    client: httpx.AsyncClient, tasks: int, seconds: float
) -> tuple[int, float]:
    """Bare ``httpx.AsyncClient`` POSTs from ``tasks`` tasks for ``seconds``."""
    started = time.perf_counter()
    deadline = started + seconds

    async def task() -> int:
        count = 0
        while time.perf_counter() < deadline:
            (await client.post("/db/query", content=QUERY)).raise_for_status()
            count += 1
        return count

    counts = await asyncio.gather(*(task() for _ in range(tasks)))
    return sum(counts), time.perf_counter() - started


async def measure_bare(url: str, rounds: int, seconds: float, tasks: int) -> dict[str, float]:
    """Bare calls per second: ``httpx.Client`` and ``httpx.AsyncClient`` taking turns."""
    base = url.replace("rqlite://", "http://", 1)
    totals = {"httpx.Client": [0.0, 0.0], f"httpx.AsyncClient x{tasks}": [0.0, 0.0]}
    with httpx.Client(base_url=base) as client:
        async with httpx.AsyncClient(base_url=base) as aclient:
            for _ in range(rounds):
                for label, (count, elapsed) in (
                    ("httpx.Client", bare_sync_round(client, seconds)),
                    (
                        f"httpx.AsyncClient x{tasks}",
                        await bare_async_round(aclient, tasks, seconds),
                    ),
                ):
                    totals[label][0] += count
                    totals[label][1] += elapsed
    return {label: count / elapsed for label, (count, elapsed) in totals.items()}


async def measure(url: str, rounds: int, seconds: float, tasks: int) -> dict[str, float]:
    """Commits per second by variant, the variants taking turns round after round."""
    totals: dict[str, list[float]] = {}
    sync = RqliteStore(url)
    plain = Execution(id="sync", definition_id="bench")
    sync.commit(plain, [])
    stores = {name: await open_(url) for name, open_ in ASYNC_VARIANTS.items()}
    groups: dict[str, list[Execution]] = {}
    for name, store in stores.items():
        for width in (tasks, 1):
            exes = [Execution(id=f"{name}{width}-{i}", definition_id="b") for i in range(width)]
            for exe in exes:
                await store.commit(exe, [])
            groups[f"{name} x{width}"] = exes
    try:
        for _ in range(rounds):
            count, elapsed = sync_round(sync, plain, seconds)
            totals.setdefault("sync", [0, 0.0])
            totals["sync"][0] += count
            totals["sync"][1] += elapsed
            for label, exes in groups.items():
                store = stores[label.rsplit(" ", 1)[0]]
                count, elapsed = await async_round(store, exes, seconds)
                totals.setdefault(label, [0, 0.0])
                totals[label][0] += count
                totals[label][1] += elapsed
    finally:
        sync.close()
        for store in stores.values():
            await store.close()
    return {label: count / elapsed for label, (count, elapsed) in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0, help="per variant per round")
    parser.add_argument("--tasks", type=int, default=10, help="async tasks on one store")
    parser.add_argument("--bare", action="store_true", help="also time bare httpx calls")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir, fake_node(Path(workdir)) as url:
        tables = [("commits/s", asyncio.run(measure(url, args.rounds, args.seconds, args.tasks)))]
        if args.bare:
            bare = asyncio.run(measure_bare(url, args.rounds, args.seconds, args.tasks))
            tables.append(("calls/s", bare))
    for unit, rates in tables:
        first = next(iter(rates.values()))
        print(f"{'variant':<22} {unit:>10} {'ratio':>7}")
        for label, rate in rates.items():
            print(f"{label:<22} {rate:>10,.0f} {rate / first:>6.2f}x")


if __name__ == "__main__":
    main()
