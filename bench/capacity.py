"""Side measurements of docs/capacity.md (issue 22): WAL bytes and Redis server time per
operation, what PostgreSQL's ``NOTIFY`` costs a commit, stored sizes of marks and items.

Not part of ``make bench`` (it starts servers of its own from ``initdb``/``pg_ctl`` and
``redis-server``):

    python bench/capacity.py [--part wal|redis-time|notify|sizes]... [--executions 400]
                             [--repeat 2] [--seconds 2] [--rounds 3]
                             [--out /tmp/capacity-bench.json]

No part touches the shared PostgreSQL or Redis: each starts a private server (PostgreSQL as
harel-store-postgres's test ``OwnServer``, Redis as ``harel_testing.redis``'s
``RedisServerProcess``), or a moto table through the backend's harness, and stops or deletes
it on exit, also when the part fails.

* **wal** — a private PostgreSQL (fsync off: the WAL a commit writes does not depend on it),
  ``--executions`` toggle executions created by a ``DurableRunner``; WAL bytes per operation =
  the ``pg_current_wal_lsn()`` difference around a loop ÷ the operations of the loop: runner
  events (a kept copy: one commit with its mark), side commits (an emit to the next execution,
  a mark, a timer, a trace step) and state-only commits, each loop twice (pass 1 right after a
  ``CHECKPOINT``, so it pays the full-page images; pass 2 without); then claiming all that work
  (``limit=30``: per group), acking every claimed entry (per ack) and releasing every group.
* **redis-time** — a private ``redis-server`` (append-only file, ``appendfsync always``), the
  same executions and loops once each plus one ``enqueue`` per execution; per loop the
  differences of ``INFO commandstats`` (``cmdstat_evalsha`` calls and usec: server time per
  script call and per operation), ``aof_current_size`` and ``used_memory`` (bytes per
  operation: a runner event's is the memory of one dedupe mark).
* ``--repeat`` runs **wal** and **redis-time** that many times, each on a new server, and adds
  the range (min, max) of every figure over the runs.
* **notify** — a private PostgreSQL with fsync on (commits wait for their WAL flush), 1 and 8
  threads, each with its own store and execution, committing for ``--seconds`` in
  ``--rounds`` rounds that alternate the order: *A* = a mark and a timer (it touches the
  execution's work row, so ``harel_commit`` calls ``pg_notify``), *B* = a mark and a trace step
  (no work touch, no ``pg_notify``), after 0.5 s of each unrecorded; commits/s per round and
  A ÷ B of each round.
* **sizes** — PostgreSQL (private, fsync off): ``pg_total_relation_size`` of
  ``processed_events`` and ``executions`` ÷ their rows after 200 toggle executions took 25
  runner events each; DynamoDB (moto, a table of its own): the stored size of each item of one
  toggle execution's partition after 10 runner events, by the store's own size rule
  (``harel_store_dynamodb._values.item_size``: attribute names plus values, an upper estimate).

Clients and servers share this machine's cores: commits/s and server µs move with the load
(compare figures of one run, or of interleaved runs); WAL bytes, AOF bytes, memory and sizes
do not depend on it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from itertools import count
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
from common import Target, open_harness
from harel.conformance import backend_test_url
from harel.engine import DurableRunner, definition_from_dsl
from harel.model import Event, Execution
from harel.store.contract import Claim, TimerOp
from harel_store_dynamodb._values import item_size
from harel_store_postgres import PostgresStore
from harel_store_redis import RedisStore
from harel_testing.redis import RedisServerProcess
from overhead import TOGGLE
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
PG_TEST_SERVERS = ROOT / "harel-store-postgres" / "tests" / "conftest.py"
"""Where ``OwnServer`` (a throwaway PostgreSQL cluster) lives: the PostgreSQL tests' fixtures."""

PARTS = ("wal", "redis-time", "notify", "sizes")
SCHEMA = "capacity"
FAR = 1e12
"""A timer time that never comes due (the notify part's timers)."""
CLAIM_LIMIT = 30
EVENT_IDS = count()
"""Dedupe mark names of the notify part, never repeated within a run."""
WARM_UP = 0.5
"""notify: seconds of each kind run unrecorded before the rounds of a thread count."""


# -- servers ----------------------------------------------------------------------------------


def _pg_servers() -> ModuleType:
    """The PostgreSQL tests' conftest, loaded under a name of its own (``bench/conftest.py``
    is ``conftest`` here) for its ``OwnServer`` and ``_bindir``."""
    spec = importlib.util.spec_from_file_location("harel_pg_test_servers", PG_TEST_SERVERS)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {PG_TEST_SERVERS}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def private_postgres(*, fsync: bool) -> Iterator[str]:
    """The URL of a new PostgreSQL cluster in a temporary directory (fsync on or off), stopped
    and deleted on exit."""
    servers = _pg_servers()
    bindir = servers._bindir()
    if bindir is None:
        raise SystemExit("no initdb/pg_ctl on this machine for a private PostgreSQL server")
    server = servers.OwnServer(bindir)
    try:
        server.start(fsync=fsync)
        yield str(server.url)
    finally:
        server.destroy()


@contextmanager
def private_redis() -> Iterator[RedisServerProcess]:
    """A new ``redis-server`` (AOF, ``appendfsync always``), stopped and removed on exit."""
    with tempfile.TemporaryDirectory(prefix="harel-capacity-redis-") as tmp:
        server = RedisServerProcess(Path(tmp))
        try:
            server.start()
            yield server
        finally:
            server.remove()


# -- the workload both per-operation parts run ------------------------------------------------


@dataclass
class Toggles:
    """``ids`` toggle executions of a ``DurableRunner`` over ``store``, and the loops the
    parts measure; each loop returns how many operations it ran."""

    store: Any
    runner: DurableRunner
    definition: str
    ids: list[str]
    exes: list[Execution] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)

    @classmethod
    def create(cls, store: Any, executions: int) -> Toggles:
        """A runner over ``store`` with the toggle definition (nothing created yet)."""
        defn = definition_from_dsl(TOGGLE)
        runner = DurableRunner(store, {defn.id: defn})
        return cls(store, runner, defn.id, [f"e{n}" for n in range(executions)])

    def creates(self) -> int:
        """``runner.create`` of every execution (one insert each)."""
        for execution_id in self.ids:
            self.runner.create(self.definition, execution_id=execution_id)
        return len(self.ids)

    def events(self) -> int:
        """One ``Go`` per execution: the runner's kept copy, one commit with its mark."""
        for execution_id in self.ids:
            self.runner.process(execution_id, Event(kind="Go"))
        return len(self.ids)

    def load(self) -> None:
        """``store.load`` every execution once: the objects the store-level commits use (not
        timed: each part calls it between two measured loops)."""
        self.exes = []
        for execution_id in self.ids:
            exe = self.store.load(execution_id)
            assert exe is not None
            self.exes.append(exe)

    def side_commits(self, tag: str) -> int:
        """Per execution one commit with an emit to the next one, a dedupe mark (named by
        ``tag``), a timer already due and a trace step (after :meth:`load`)."""
        exes = self.exes
        for n, exe in enumerate(exes):
            self.store.commit(
                exe,
                [(self.ids[(n + 1) % len(exes)], Event(kind="Go"))],
                processed_event_id=f"side-{tag}-{n}",
                timers=(TimerOp.schedule("t", 1e9),),
                trace={"step": n},
            )
        return len(exes)

    def saves(self) -> int:
        """A state-only commit of every execution (after :meth:`load`)."""
        exes = self.exes
        for exe in exes:
            self.store.save(exe)
        return len(exes)

    def enqueues(self) -> int:
        """One ``enqueue`` of a ``Go`` to every execution."""
        for execution_id in self.ids:
            self.store.enqueue(execution_id, Event(kind="Go"))
        return len(self.ids)

    def claim_all(self) -> int:
        """Claims (``limit=30``) until nothing is left; the groups claimed."""
        now = time.time()
        while got := self.store.claim("w", now, lease=300.0, limit=CLAIM_LIMIT):
            self.claims.extend(got)
        return len(self.claims)

    def units(self) -> int:
        """The units the claims hold."""
        return sum(claim.units for claim in self.claims)

    def acks(self) -> int:
        """``ack_outbox`` of every claimed entry."""
        seqs = [entry.seq for claim in self.claims for entry in claim.outbox]
        for seq in seqs:
            self.store.ack_outbox(seq)
        return len(seqs)

    def releases(self) -> int:
        """``release`` of every claimed group."""
        for claim in self.claims:
            self.store.release("w", claim.execution_id)
        return len(self.claims)


# -- wal --------------------------------------------------------------------------------------


def wal(executions: int) -> dict[str, Any]:
    """WAL bytes per operation on a private server (module doc)."""
    with private_postgres(fsync=False) as url, psycopg.connect(url, autocommit=True) as conn:

        def lsn() -> int:
            row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
            assert row is not None
            return int(row[0])

        def per_op(loop: Callable[[], int], *, checkpoint: bool = False) -> int:
            if checkpoint:
                conn.execute("CHECKPOINT")
            start = lsn()
            ops = loop()
            return round((lsn() - start) / max(ops, 1))

        store = PostgresStore.from_url(f"{url}?schema={SCHEMA}")
        try:
            work = Toggles.create(store, executions)
            out: dict[str, Any] = {"create": per_op(work.creates)}

            def passes(loop: Callable[[str], int]) -> dict[str, int]:
                return {
                    "pass 1 (after CHECKPOINT)": per_op(partial(loop, "1"), checkpoint=True),
                    "pass 2": per_op(partial(loop, "2")),
                }

            out["runner event"] = passes(lambda _tag: work.events())
            work.load()
            out["side commit (emit, mark, timer, trace)"] = passes(work.side_commits)
            out["state-only commit"] = passes(lambda _tag: work.saves())
            out["claim, per group"] = per_op(work.claim_all)
            out["groups claimed"], out["units claimed"] = len(work.claims), work.units()
            out["ack, per ack"] = per_op(work.acks)
            out["release, per group"] = per_op(work.releases)
        finally:
            store.close()
    return out


# -- redis-time -------------------------------------------------------------------------------


def redis_time(executions: int) -> dict[str, Any]:
    """Server time, AOF bytes and memory per operation on a private server (module doc)."""
    with private_redis() as server:
        client = server.client()
        store = RedisStore.from_url(f"{server.url}?prefix={SCHEMA}:")
        try:

            def stats() -> tuple[int, float, int, int]:
                scripts = client.info("commandstats").get("cmdstat_evalsha", {})
                aof = client.info("persistence")["aof_current_size"]
                memory = client.info("memory")["used_memory"]
                return int(scripts.get("calls", 0)), float(scripts.get("usec", 0)), aof, memory

            def per_op(loop: Callable[[], int]) -> dict[str, float]:
                calls0, usec0, aof0, mem0 = stats()
                ops = max(loop(), 1)
                calls1, usec1, aof1, mem1 = stats()
                calls = calls1 - calls0
                return {
                    "calls per op": round(calls / ops, 2),
                    "server µs per call": round((usec1 - usec0) / max(calls, 1), 1),
                    "server µs per op": round((usec1 - usec0) / ops, 1),
                    "AOF bytes per op": round((aof1 - aof0) / ops),
                    "memory bytes per op": round((mem1 - mem0) / ops),
                }

            work = Toggles.create(store, executions)
            out: dict[str, Any] = {
                "create": per_op(work.creates),
                "runner event": per_op(work.events),
            }
            work.load()
            out["side commit (emit, mark, timer, trace)"] = per_op(partial(work.side_commits, "1"))
            out["state-only commit"] = per_op(work.saves)
            out["enqueue"] = per_op(work.enqueues)
            out[f"claim (limit {CLAIM_LIMIT}), per group"] = per_op(work.claim_all)
            out["groups claimed"], out["units claimed"] = len(work.claims), work.units()
            out["ack, per ack"] = per_op(work.acks)
            out["release, per group"] = per_op(work.releases)
        finally:
            store.close()
            client.close()
    return out


# -- notify -----------------------------------------------------------------------------------


def notify(seconds: float, rounds: int) -> dict[str, Any]:
    """Commits/s with and without ``pg_notify``, 1 and 8 threads, fsync on (module doc)."""
    rates: dict[str, list[int]] = {}
    with private_postgres(fsync=True) as url:
        store_url = f"{url}?schema={SCHEMA}&pool_max=2"
        PostgresStore.from_url(store_url).close()  # the schema, once, before the threads
        for threads in (1, 8):
            for kind, values in _notify_rounds(store_url, threads, seconds, rounds).items():
                rates[f"{threads} threads {kind}"] = values
    ratios = {
        f"{threads} threads A / B": [
            round(a / b, 2)
            for a, b in zip(
                rates[f"{threads} threads A"], rates[f"{threads} threads B"], strict=True
            )
        ]
        for threads in (1, 8)
    }
    return {
        "A": "mark + timer (harel_commit calls pg_notify)",
        "B": "mark + trace step (no pg_notify)",
        "commits/s per round": rates,
        "A / B per round": ratios,
    }


def _notify_rounds(url: str, threads: int, seconds: float, rounds: int) -> dict[str, list[int]]:
    """Commits/s of kind A and of kind B per round, ``threads`` threads each with its own store
    and execution; the kinds take turns, each round in the other order."""
    stores = [PostgresStore.from_url(url) for _ in range(threads)]
    try:
        exes = [Execution(definition_id="d") for _ in stores]
        for store, exe in zip(stores, exes, strict=True):
            store.commit(exe, [])

        def notifying(index: int) -> None:
            timers = (TimerOp.schedule("t", FAR),)
            stores[index].commit(exes[index], [], f"n{next(EVENT_IDS)}", timers=timers)

        def quiet(index: int) -> None:
            n = next(EVENT_IDS)
            stores[index].commit(exes[index], [], f"n{n}", trace={"n": n})

        steps: dict[str, Callable[[int], None]] = {"A": notifying, "B": quiet}
        for step in steps.values():  # warm-up, not recorded: connections, plans, caches
            _threads_rate(threads, WARM_UP, step)
        out: dict[str, list[int]] = {"A": [], "B": []}
        for rnd in range(rounds):
            for kind in ("A", "B") if rnd % 2 == 0 else ("B", "A"):
                out[kind].append(_threads_rate(threads, seconds, steps[kind]))
        return out
    finally:
        for store in stores:
            store.close()


def _threads_rate(threads: int, seconds: float, step: Callable[[int], None]) -> int:
    """Calls per second of ``step(thread index)`` summed over ``threads`` threads that each
    call it in a loop for ``seconds``."""
    done = [0] * threads
    stop = time.monotonic() + seconds

    def run(index: int) -> None:
        while time.monotonic() < stop:
            step(index)
            done[index] += 1

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return round(sum(done) / (time.monotonic() - started))


# -- sizes ------------------------------------------------------------------------------------


def sizes() -> dict[str, Any]:
    """Bytes per PostgreSQL mark and execution, DynamoDB item sizes (module doc)."""
    return {"postgres": _postgres_sizes(200, 25), "dynamodb (moto)": _dynamodb_sizes(10)}


def _postgres_sizes(executions: int, events: int) -> dict[str, Any]:
    with private_postgres(fsync=False) as url:
        store = PostgresStore.from_url(f"{url}?schema={SCHEMA}")
        try:
            work = Toggles.create(store, executions)
            work.creates()
            for _ in range(events):
                work.events()
        finally:
            store.close()
        with psycopg.connect(url, autocommit=True) as conn:
            out: dict[str, Any] = {}
            for table, per in (("processed_events", "mark"), ("executions", "execution")):
                name = sql.Identifier(SCHEMA, table)
                conn.execute(sql.SQL("VACUUM ANALYZE {}").format(name))
                rows = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(name)).fetchone()
                size = conn.execute(
                    "SELECT pg_total_relation_size(%s::regclass)", (f"{SCHEMA}.{table}",)
                ).fetchone()
                assert rows is not None and size is not None
                out[f"{table} rows"] = int(rows[0])
                out[f"bytes per {per} (table + indexes)"] = round(int(size[0]) / int(rows[0]))
    return out


def _dynamodb_sizes(events: int) -> dict[str, Any]:
    kinds = {"x": "execution", "x:": "trace step", "p:": "mark", "t:": "timer", "w": "work row"}
    with tempfile.TemporaryDirectory(prefix="harel-capacity-ddb-") as tmp:
        workdir = Path(tmp)
        url = backend_test_url("dynamodb", workdir)
        if url is None:
            raise SystemExit("no DynamoDB URL (moto not installed?)")
        with open_harness(Target("dynamodb", url), workdir) as harness:
            store = harness.open_sync()
            try:
                work = Toggles.create(store, 1)
                work.creates()
                for _ in range(events):
                    work.events()
            finally:
                store.close()
            found: dict[str, list[int]] = {}
            for item in harness.scan():  # type: ignore[attr-defined]
                if item["pk"]["S"] != f"x:{work.ids[0]}":
                    continue
                sk = item["sk"]["S"]
                kind = kinds.get(sk) or kinds.get(sk[:2], sk)
                found.setdefault(kind, []).append(item_size(item))
    return {
        kind: {"items": len(values), "bytes min": min(values), "bytes max": max(values)}
        for kind, values in sorted(found.items())
    }


# -- the run ----------------------------------------------------------------------------------


def ranges(runs: list[Any]) -> Any:
    """``[min, max]`` of every number over ``runs`` (dicts of the same shape)."""
    first = runs[0]
    if isinstance(first, dict):
        return {key: ranges([run[key] for run in runs]) for key in first}
    if isinstance(first, int | float) and not isinstance(first, bool):
        return [min(runs), max(runs)]
    return first


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--part", action="append", choices=PARTS, help="default: all")
    parser.add_argument("--executions", type=int, default=400, help="wal, redis-time")
    parser.add_argument("--repeat", type=int, default=2, help="runs of wal and redis-time")
    parser.add_argument("--seconds", type=float, default=2.0, help="notify: seconds per loop")
    parser.add_argument("--rounds", type=int, default=3, help="notify: rounds")
    parser.add_argument("--out", default="/tmp/capacity-bench.json")
    args = parser.parse_args()
    parts = args.part or list(PARTS)
    report: dict[str, Any] = {
        "command": " ".join(["python", "bench/capacity.py", *sys.argv[1:]]),
        "date": datetime.now().isoformat(timespec="minutes"),
        "machine": {"cpus": os.cpu_count()},
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "seconds": {},
    }
    measures: dict[str, Callable[[], Any]] = {
        "wal": lambda: wal(args.executions),
        "redis-time": lambda: redis_time(args.executions),
        "notify": lambda: notify(args.seconds, args.rounds),
        "sizes": sizes,
    }
    for part in parts:
        started = time.monotonic()
        if part in ("wal", "redis-time"):
            runs = [measures[part]() for _ in range(max(args.repeat, 1))]
            report[part] = {"range": ranges(runs), "runs": runs} if len(runs) > 1 else runs[0]
        else:
            report[part] = measures[part]()
        report["seconds"][part] = round(time.monotonic() - started, 1)
    report["load_after"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(report, indent=2, ensure_ascii=False)
    Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
