"""Our state-only commit against the reference implementation's, side by side in one run.

The reference is the PyPI package ``harel==0.9.0``.  Its top-level package is also named
``harel``, so it can never share an interpreter with this repository's: it lives in a venv of
its own, named by ``HAREL_REFERENCE_PYTHON`` (its ``python``; see bench/README.md for the one
``pip`` command).  Not part of ``make test`` or ``make bench``.

For each backend (SQLite, libSQL) and ``synchronous`` setting (``NORMAL``, ``FULL``), two child
interpreters are started: ours (this interpreter, ``SqliteStore`` / ``LibsqlStore`` of this
repository) and the reference's (its ``SqliteStore`` / ``LibsqlStore``).  Each opens a file of
its own in one directory, with the same PRAGMAs (``journal_mode = WAL``, the ``synchronous``
setting; each child reads them back and the report prints them), stores one small execution
(:func:`_document`: the figure-2 execution, ~300 bytes of JSON) and then, on each request of
the parent, runs ``store.commit(exe, [])`` of that execution (its context changed each time)
for about ``--seconds``.  The two take turns round after round (the order alternating), so a
busy moment of the machine slows both alike; the report gives the median and the best round's
commits/s, wall and CPU µs per commit, and ours ÷ the reference's (commits/s: above 1 means
ours is faster).

    HAREL_REFERENCE_PYTHON=/tmp/refvenv/bin/python python bench/reference.py \
        [--backend sqlite|libsql]... [--synchronous NORMAL|FULL]... [--rounds N] \
        [--seconds S] [--dir DIR]

The module imports only the standard library at its top: the children import their own
``harel`` (:func:`_ours` or :func:`_reference`) once running.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENV = "HAREL_REFERENCE_PYTHON"
BACKENDS = ("sqlite", "libsql")
SETTINGS = ("NORMAL", "FULL")
TARGET = 0.9
"""Issue 20: ours at least 0.9x the reference's state-only commits/s."""

Commit = Callable[[int], None]


# -- the children ---------------------------------------------------------------------------


def _document(execution: Any, status: Any) -> Any:
    """The benchmarked execution, built with either package's ``Execution`` and ``Status``:
    the fields figure 2 uses (bench/common.py ``execution``)."""
    return execution(
        id="reference-bench",
        definition_id="bench-0",
        status=status.RUNNING,
        active_path="Main.Waiting",
        context={"n": 0, "payload": "x" * 200},
    )


def _ours(backend: str, path: Path, synchronous: str) -> tuple[Commit, Any, Callable[[], None]]:
    """This repository's store on ``path``: the commit loop's step, the connection (to read
    the PRAGMAs back) and ``close``."""
    from harel.model import Execution, Status

    store: Any
    if backend == "sqlite":
        from harel_store_sqlite import SqliteStore

        store = SqliteStore(str(path), synchronous=synchronous)
    else:
        from harel_store_libsql import LibsqlStore

        store = LibsqlStore(str(path), synchronous=synchronous)
    return _commit_loop(store, _document(Execution, Status)), store._conn, store.close


def _reference(
    backend: str, path: Path, synchronous: str
) -> tuple[Commit, Any, Callable[[], None]]:
    """The reference's store on ``path`` with the PRAGMAs ours sets (its SQLite store sets
    WAL itself, its libSQL store none): the commit loop's step, the connection, ``close``."""
    from harel.engine.execution import Execution, Status  # the reference's own package

    store: Any
    if backend == "sqlite":
        from harel.engine.store.sqlite import SqliteStore

        store = SqliteStore(str(path))
    else:
        from harel.engine.store.libsql import LibsqlStore

        store = LibsqlStore(str(path))
    conn = store._conn
    for pragma in ("PRAGMA journal_mode = WAL", f"PRAGMA synchronous = {synchronous}"):
        conn.execute(pragma).fetchall()
    conn.commit()
    return _commit_loop(store, _document(Execution, Status)), conn, store.close


def _commit_loop(store: Any, exe: Any) -> Commit:
    """Insert ``exe`` into ``store`` (so every timed commit is an update) and return the timed
    step: change the context, commit state-only."""
    store.commit(exe, [])
    commit, context = store.commit, exe.context

    def step(i: int) -> None:
        context["n"] = i
        commit(exe, [])

    return step


def _pragmas(conn: Any) -> dict[str, str]:
    """The connection's journal mode and ``synchronous`` (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA)."""
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    journal = conn.execute("PRAGMA journal_mode").fetchall()[0][0]
    level = int(conn.execute("PRAGMA synchronous").fetchall()[0][0])
    return {"journal_mode": str(journal).upper(), "synchronous": names.get(level, str(level))}


def _child(side: str, backend: str, path: Path, synchronous: str) -> None:
    """Serve the parent: one JSON line once open (the PRAGMAs), then for every ``run S`` line
    one JSON line with the commits made in about ``S`` seconds, their wall and CPU seconds."""
    opener = _ours if side == "ours" else _reference
    step, conn, close = opener(backend, path, synchronous)
    print(json.dumps({"ready": True, "pragmas": _pragmas(conn)}), flush=True)
    count = 0
    try:
        for line in sys.stdin:
            words = line.split()
            if not words or words[0] != "run":
                break
            seconds = float(words[1])
            done, cpu, started = 0, time.process_time(), time.perf_counter()
            deadline = started + seconds
            while True:
                step(count)
                count += 1
                done += 1
                now = time.perf_counter()
                if now >= deadline:
                    break
            reply = {"commits": done, "wall": now - started, "cpu": time.process_time() - cpu}
            print(json.dumps(reply), flush=True)
    finally:
        close()


# -- the parent -----------------------------------------------------------------------------


@dataclass
class Side:
    """One child: its process, the PRAGMAs it reported and its timed rounds."""

    name: str
    process: subprocess.Popen[str]
    pragmas: dict[str, str] = field(default_factory=dict)
    rates: list[float] = field(default_factory=list)
    wall_us: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)

    def ask(self, line: str) -> dict[str, Any]:
        """Send one request line, read the one JSON reply (a dead child raises)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        reply = self.process.stdout.readline()
        if not reply:
            raise RuntimeError(f"the {self.name} child exited (code {self.process.wait()})")
        value: dict[str, Any] = json.loads(reply)
        return value

    def sample(self, seconds: float) -> None:
        """One timed run, recorded."""
        reply = self.ask(f"run {seconds}")
        commits = reply["commits"]
        self.rates.append(commits / reply["wall"])
        self.wall_us.append(reply["wall"] / commits * 1e6)
        self.cpu_us.append(reply["cpu"] / commits * 1e6)


def _start(name: str, python: str, backend: str, path: Path, synchronous: str) -> Side:
    command = [python, str(Path(__file__).resolve()), "--child", name]
    command += ["--backend", backend, "--synchronous", synchronous, "--path", str(path)]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # each interpreter imports only its own packages
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    side = Side(name, process)
    assert process.stdout is not None
    ready = process.stdout.readline()
    if not ready:
        raise RuntimeError(f"the {name} child ({python}) failed to open its store")
    side.pragmas = json.loads(ready)["pragmas"]
    return side


def _stop(side: Side) -> None:
    if side.process.stdin is not None:
        side.process.stdin.close()
    side.process.wait(timeout=30)


@dataclass
class Row:
    """The report of one backend setting."""

    label: str
    ours: Side
    reference: Side

    def ratio(self, pick: Callable[[list[float]], float]) -> float:
        """Ours ÷ the reference's commits/s (``pick``: median or max of the rounds)."""
        return pick(self.ours.rates) / pick(self.reference.rates)


def measure(
    reference_python: str,
    backend: str,
    synchronous: str,
    workdir: Path,
    rounds: int,
    seconds: float,
) -> Row:
    """Both children on ``backend`` at ``synchronous``, taking turns for ``rounds`` rounds."""
    folder = workdir / f"{backend}-{synchronous.lower()}"
    folder.mkdir(parents=True, exist_ok=True)
    ours = _start("ours", sys.executable, backend, folder / "ours.db", synchronous)
    try:
        reference = _start(
            "reference", reference_python, backend, folder / "reference.db", synchronous
        )
        try:
            for side in (ours, reference):  # warm-up, not recorded
                side.ask(f"run {min(seconds, 0.2)}")
            for index in range(rounds):
                order = (ours, reference) if index % 2 == 0 else (reference, ours)
                for side in order:
                    side.sample(seconds)
        finally:
            _stop(reference)
    finally:
        _stop(ours)
    return Row(f"{backend} (synchronous={synchronous})", ours, reference)


def _table(rows: list[Row]) -> str:
    median = statistics.median
    lines = [
        "| backend | side | PRAGMAs | commits/s (median, best) | wall µs/commit (median) "
        "| CPU µs/commit (median) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        for side in (row.ours, row.reference):
            pragmas = ", ".join(f"{k}={v}" for k, v in side.pragmas.items())
            lines.append(
                f"| {row.label} | {side.name} | {pragmas} | {median(side.rates):,.0f}, "
                f"{max(side.rates):,.0f} | {median(side.wall_us):.1f} | "
                f"{median(side.cpu_us):.1f} |"
            )
    lines += ["", f"| backend | ours ÷ reference, median | best | CPU ÷ | ≥ {TARGET}x |"]
    lines.append("|---|---|---|---|---|")
    for row in rows:
        value = row.ratio(median)
        cpu = median(row.reference.cpu_us) / median(row.ours.cpu_us)
        mark = "✓" if value >= TARGET else "✗"
        lines.append(
            f"| {row.label} | {value:.2f}x | {row.ratio(max):.2f}x | {cpu:.2f}x | {mark} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments; run a child, or the side-by-side measurement and its report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", action="append", choices=BACKENDS)
    parser.add_argument("--synchronous", action="append", choices=SETTINGS)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument(
        "--dir", type=Path, help="where the database files go (default: a temp dir)"
    )
    parser.add_argument("--child", choices=("ours", "reference"), help=argparse.SUPPRESS)
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.backend[0], args.path, args.synchronous[0])
        return 0
    reference_python = os.environ.get(ENV)
    if not reference_python:
        print(
            f"{ENV} is not set: it must name the python of a venv holding the reference "
            "implementation (harel==0.9.0, installed outside this repository; see "
            "bench/README.md). Nothing was measured.",
            file=sys.stderr,
        )
        return 2
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="harel-reference-"))
    rows = []
    try:
        for backend in args.backend or BACKENDS:
            for synchronous in args.synchronous or SETTINGS:
                rows.append(
                    measure(
                        reference_python, backend, synchronous, workdir, args.rounds, args.seconds
                    )
                )
    finally:
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    load = os.getloadavg()
    print(
        f"reference: {reference_python}; {args.rounds} rounds of {args.seconds} s per side, "
        f"taking turns; load average {load[0]:.2f}\n"
    )
    print(_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
