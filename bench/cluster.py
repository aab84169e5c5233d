"""Redis Cluster scale-out (issue 22): how the sharded layout spreads over the masters, what a
commit and a sweep cost in round trips, and commits/s on 1 master against 3.

Not part of ``make bench`` (it starts its own clusters from ``redis-server``/``redis-cli``):

    python bench/cluster.py [--executions 10000] [--shards 3 12] [--seconds 5] [--workers 4]
                            [--out /tmp/cluster-bench.json]

* **spread** — a 3-master cluster; per ``--shards`` N, ``--executions`` executions committed
  (insert + one update with an emit to the next execution and a timer), then the keys
  (``DBSIZE``) and the commands the server ran (``INFO commandstats`` calls, scripts' own
  commands included) per master, against the fair share (total / masters);
* **round trips** — the script calls (``EVALSHA``/``EVAL``, summed over the masters) of one
  operation of each kind, 3 shards;
* **throughput** — ``--workers`` threads (one store each) committing state-only updates and
  side commits (an emit to another execution, so most cross shards) for ``--seconds`` on a
  1-master cluster and on a 3-master one (no replicas), 3 shards on both.  Client and servers
  share this machine's cores: the figure shows what the clients can push, not the cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from harel.model import Event, Execution
from harel.store.contract import TimerOp
from harel_store_redis import RedisStore
from harel_testing.redis import RedisClusterProcess


def master_clients(cluster: RedisClusterProcess) -> dict[int, Any]:
    """A plain client per running master."""
    return {port: cluster.node_client(port) for port in cluster.master_ports()}


def calls(clients: dict[int, Any], names: tuple[str, ...] | None = None) -> dict[int, int]:
    """Commands each master ran since its stats were reset (``names``: only those)."""
    out: dict[int, int] = {}
    for port, client in clients.items():
        stats = client.info("commandstats")
        out[port] = sum(
            int(value["calls"])
            for key, value in stats.items()
            if names is None or key.removeprefix("cmdstat_") in names
        )
    return out


def reset(clients: dict[int, Any]) -> None:
    for client in clients.values():
        client.config_resetstat()


def open_store(cluster: RedisClusterProcess, shards: int, prefix: str) -> RedisStore:
    return RedisStore.from_url(f"{cluster.url}&shards={shards}&prefix={prefix}")


def spread(cluster: RedisClusterProcess, shards: int, executions: int) -> dict[str, Any]:
    clients = master_clients(cluster)
    prefix = f"spread-{shards}-{uuid.uuid4().hex[:6]}:"
    store = open_store(cluster, shards, prefix)
    before = {port: client.dbsize() for port, client in clients.items()}
    reset(clients)
    exes = [Execution(id=f"e{n}", definition_id="d") for n in range(executions)]
    for exe in exes:
        store.save(exe)
    for n, exe in enumerate(exes):
        target = exes[(n + 1) % executions].id
        store.commit(
            exe, [(target, Event(id=f"ev{n}", kind="Go"))], timers=(TimerOp.schedule("/t", 1.0),)
        )
    ran = calls(clients)
    keys = {port: client.dbsize() - before[port] for port, client in clients.items()}
    store.close()
    for client in clients.values():
        client.close()

    def share(values: dict[int, int]) -> dict[str, Any]:
        fair = sum(values.values()) / len(values)
        return {
            "per_master": {str(port): count for port, count in sorted(values.items())},
            "fair": round(fair, 1),
            "max_over_fair": round(max(values.values()) / fair, 3) if fair else None,
        }

    return {"shards": shards, "executions": executions, "keys": share(keys), "commands": share(ran)}


def round_trips(cluster: RedisClusterProcess) -> dict[str, int]:
    """Script calls per operation, summed over the masters (each is one round trip)."""
    clients = master_clients(cluster)
    store = open_store(cluster, 3, f"rt-{uuid.uuid4().hex[:6]}:")
    exe = Execution(id="rt-1", definition_id="d")
    other = Execution(id="rt-2", definition_id="d")
    store.save(other)
    steps: list[tuple[str, Any]] = [
        ("commit: insert, state only", lambda: store.save(exe)),
        ("commit: update, state only", lambda: store.save(exe)),
        (
            "commit: emit to another execution + mark + timer + trace",
            lambda: store.commit(
                exe,
                [("rt-2", Event(id="x", kind="Go"))],
                processed_event_id="p1",
                timers=(TimerOp.schedule("/t", 1.0),),
                trace={"step": 1},
            ),
        ),
        ("enqueue", lambda: store.enqueue("rt-2", Event(id="q", kind="Go"))),
        ("load", lambda: store.load("rt-1")),
        ("pending_outbox", lambda: store.pending_outbox()),
        ("pending_spawns", lambda: store.pending_spawns()),
        ("due_timers", lambda: store.due_timers(1e18)),
        ("list_executions", lambda: store.list_executions()),
        ("claim (2 groups, entries in 2 shards)", lambda: store.claim("w", 1e12)),
        ("release", lambda: store.release("w", "rt-2")),
    ]
    figures: dict[str, int] = {}
    names = ("evalsha", "eval")
    for name, step in steps:
        reset(clients)
        step()
        figures[name] = sum(calls(clients, names).values())
    store.close()
    for client in clients.values():
        client.close()
    return figures


def throughput(cluster: RedisClusterProcess, workers: int, seconds: float) -> dict[str, float]:
    prefix = f"tp-{uuid.uuid4().hex[:6]}:"
    stores = [open_store(cluster, 3, prefix) for _ in range(workers)]
    results: dict[str, float] = {}
    for kind in ("state only", "emit to another execution"):
        counts = [0] * workers
        stop = time.monotonic() + seconds

        def run(
            index: int, kind: str = kind, counts: list[int] = counts, stop: float = stop
        ) -> None:
            store = stores[index]
            exes = [Execution(id=f"w{index}-{kind[0]}-{n}", definition_id="d") for n in range(50)]
            n = 0
            while time.monotonic() < stop:
                exe = exes[n % 50]
                if kind == "state only":
                    store.save(exe)
                else:
                    target = exes[(n + 1) % 50].id
                    store.commit(exe, [(target, Event(id=f"e{n}", kind="Go"))])
                n += 1
            counts[index] = n

        threads = [threading.Thread(target=run, args=(i,)) for i in range(workers)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        results[kind] = round(sum(counts) / (time.monotonic() - started), 1)
    for store in stores:
        store.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=10_000)
    parser.add_argument("--shards", type=int, nargs="+", default=[3, 12])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--out", default="/tmp/cluster-bench.json")
    args = parser.parse_args()
    report: dict[str, Any] = {"machine": {"cpus": os.cpu_count()}, "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="harel-cluster-bench-") as tmp:
        three = RedisClusterProcess(Path(tmp) / "three", masters=3, replicas=0)
        three.start()
        try:
            report["spread"] = [spread(three, n, args.executions) for n in args.shards]
            report["round_trips"] = round_trips(three)
            report["throughput_3_masters"] = throughput(three, args.workers, args.seconds)
        finally:
            three.remove()
        one = RedisClusterProcess(Path(tmp) / "one", masters=1, replicas=0)
        one.start()
        try:
            report["throughput_1_master"] = throughput(one, args.workers, args.seconds)
        finally:
            one.remove()
    report["load_after"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
