"""Our state-only commit against the reference implementation's, side by side in one run.

The reference is the PyPI package ``harel==0.9.0``.  Its top-level package is also named
``harel``, so it can never share an interpreter with this repository's: it lives in a venv of
its own, named by ``HAREL_REFERENCE_PYTHON`` (its ``python``; see bench/README.md for the one
``pip`` command).  Not part of ``make test`` or ``make bench``.

For each backend setting two child interpreters are started: ours (this interpreter, the store
of this repository) and the reference's (its store of the same name).  Each stores one small
execution (:func:`_document`: the figure-2 execution, ~300 bytes of JSON) and then, on each
request of the parent, runs ``store.commit(exe, [])`` of that execution (its context changed
each time) for about ``--seconds``.  The two take turns round after round (the order
alternating), so a busy moment of the machine slows both alike; the report gives the median
and the best round's commits/s, wall and CPU µs per commit (the child's own CPU: a server's
work shows in the wall time only), and ours ÷ the reference's (commits/s: above 1 means ours
is faster).

* SQLite, libSQL (``SqliteStore`` / ``LibsqlStore``), at each ``--synchronous`` setting
  (``NORMAL``, ``FULL``): each child opens a file of its own in one directory, with the same
  PRAGMAs (``journal_mode = WAL``, the ``synchronous`` setting; each child reads them back and
  the report prints them).
* Redis (``RedisStore``): both children on the server of ``--redis-url`` (default the local
  ``redis://127.0.0.1:6379/0``), each under a fresh key prefix of its own
  (``refbench_<random>_ours:`` and ``refbench_<random>_ref``), so neither sees the other's
  keys; every key of both prefixes is deleted at the end (by a third child, also after a
  failure).  The report prints each side's redis-py version and reply parser (``hiredis`` or
  the pure-Python one).

    HAREL_REFERENCE_PYTHON=/tmp/refvenv/bin/python python bench/reference.py \
        [--backend sqlite|libsql|redis]... [--synchronous NORMAL|FULL]... [--rounds N] \
        [--seconds S] [--dir DIR] [--redis-url URL]

The module imports only the standard library at its top: the children import their own
``harel`` (:func:`_ours` or :func:`_reference`) once running.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
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
FILE_BACKENDS = ("sqlite", "libsql")
BACKENDS = (*FILE_BACKENDS, "redis")
SETTINGS = ("NORMAL", "FULL")
REDIS_URL = "redis://127.0.0.1:6379/0"
TARGETS = {"sqlite": 0.9, "libsql": 0.9, "redis": 1.0}
"""Issue 20: ours at least 0.9x the reference's state-only commits/s on SQLite and libSQL, and
at least 1.0x on Redis."""

Commit = Callable[[int], None]


@dataclass(frozen=True)
class Place:
    """Where one child's store lives: a database file (SQLite, libSQL, with its
    ``synchronous`` setting) or a key prefix on a Redis server."""

    backend: str
    path: Path | None = None
    synchronous: str | None = None
    url: str = REDIS_URL
    prefix: str = ""

    @property
    def setting(self) -> str:
        """The file's ``synchronous`` setting (a file place has one)."""
        assert self.synchronous is not None, "a database file needs its synchronous setting"
        return self.synchronous

    def argv(self) -> list[str]:
        """The child's command-line arguments naming this place."""
        words = ["--backend", self.backend]
        if self.backend == "redis":
            return [*words, "--redis-url", self.url, "--prefix", self.prefix]
        assert self.path is not None
        return [*words, "--synchronous", self.setting, "--path", str(self.path)]


Opened = tuple[Commit, Callable[[], dict[str, str]], Callable[[], None]]
"""What an opener returns: the commit loop's step, the settings to report (read back from the
store's connection) and ``close``."""


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


def _ours(place: Place) -> Opened:
    """This repository's store at ``place``."""
    from harel.model import Execution, Status

    store: Any
    if place.backend == "redis":
        from harel_store_redis import RedisStore

        store = RedisStore.from_url(place.url, prefix=place.prefix)
        return _commit_loop(store, _document(Execution, Status)), _redis_settings, store.close
    if place.backend == "sqlite":
        from harel_store_sqlite import SqliteStore

        store = SqliteStore(str(place.path), synchronous=place.setting)
    else:
        from harel_store_libsql import LibsqlStore

        store = LibsqlStore(str(place.path), synchronous=place.setting)
    conn = store._conn
    return _commit_loop(store, _document(Execution, Status)), lambda: _pragmas(conn), store.close


def _reference(place: Place) -> Opened:
    """The reference's store at ``place``; on a file with the PRAGMAs ours sets (its SQLite
    store sets WAL itself, its libSQL store none)."""
    from harel.engine.execution import Execution, Status  # the reference's own package

    store: Any
    if place.backend == "redis":
        from harel.engine.store.redis import RedisStore

        store = RedisStore.from_url(place.url, prefix=place.prefix)
        return _commit_loop(store, _document(Execution, Status)), _redis_settings, store.close
    if place.backend == "sqlite":
        from harel.engine.store.sqlite import SqliteStore

        store = SqliteStore(str(place.path))
    else:
        from harel.engine.store.libsql import LibsqlStore

        store = LibsqlStore(str(place.path))
    conn = store._conn
    for pragma in ("PRAGMA journal_mode = WAL", f"PRAGMA synchronous = {place.setting}"):
        conn.execute(pragma).fetchall()
    conn.commit()
    return _commit_loop(store, _document(Execution, Status)), lambda: _pragmas(conn), store.close


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


def _redis_settings() -> dict[str, str]:
    """The child's redis-py version and reply parser."""
    import redis
    from redis.utils import HIREDIS_AVAILABLE

    return {"redis-py": redis.__version__, "parser": "hiredis" if HIREDIS_AVAILABLE else "python"}


def _drop_prefix(url: str, pattern: str) -> int:
    """Delete every key of the server at ``url`` matching the glob ``pattern``; how many."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        dropped, batch = 0, []
        for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 500:
                dropped += int(client.delete(*batch))
                batch = []
        if batch:
            dropped += int(client.delete(*batch))
        return dropped
    finally:
        client.close()


def _child(side: str, place: Place) -> None:
    """Serve the parent: one JSON line once open (the settings), then for every ``run S`` line
    one JSON line with the commits made in about ``S`` seconds, their wall and CPU seconds."""
    opener = _ours if side == "ours" else _reference
    step, settings, close = opener(place)
    print(json.dumps({"ready": True, "settings": settings()}), flush=True)
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
    """One child: its process, the settings it reported and its timed rounds."""

    name: str
    process: subprocess.Popen[str]
    settings: dict[str, str] = field(default_factory=dict)
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


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # each interpreter imports only its own packages
    return env


def _start(name: str, python: str, place: Place) -> Side:
    command = [python, str(Path(__file__).resolve()), "--child", name, *place.argv()]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_environment()
    )
    side = Side(name, process)
    assert process.stdout is not None
    ready = process.stdout.readline()
    if not ready:
        process.wait(timeout=30)
        raise RuntimeError(f"the {name} child ({python}) failed to open its store")
    side.settings = json.loads(ready)["settings"]
    return side


def _stop(side: Side) -> None:
    if side.process.stdin is not None:
        side.process.stdin.close()
    side.process.wait(timeout=30)


@dataclass
class Row:
    """The report of one backend setting."""

    label: str
    backend: str
    ours: Side
    reference: Side

    def ratio(self, pick: Callable[[list[float]], float]) -> float:
        """Ours ÷ the reference's commits/s (``pick``: median or max of the rounds)."""
        return pick(self.ours.rates) / pick(self.reference.rates)


def _places(backend: str, synchronous: str, workdir: Path, url: str) -> tuple[Place, Place]:
    """Ours and the reference's place: two files in one folder, or two fresh prefixes."""
    if backend == "redis":
        run = f"refbench_{secrets.token_hex(4)}"
        return (
            Place(backend, url=url, prefix=f"{run}_ours:"),
            Place(backend, url=url, prefix=f"{run}_ref"),  # the reference: an identifier
        )
    folder = workdir / f"{backend}-{synchronous.lower()}"
    folder.mkdir(parents=True, exist_ok=True)
    return (
        Place(backend, path=folder / "ours.db", synchronous=synchronous),
        Place(backend, path=folder / "reference.db", synchronous=synchronous),
    )


def _clean(places: tuple[Place, Place]) -> None:
    """Delete the keys of both Redis prefixes (a child of this interpreter does it: the parent
    imports only the standard library); nothing for files (their folder goes as a whole)."""
    for place in places:
        if place.backend == "redis":
            pattern = place.prefix + "*"
            command = [sys.executable, str(Path(__file__).resolve()), "--drop", pattern]
            command += ["--redis-url", place.url]
            subprocess.run(command, check=True, env=_environment(), timeout=120)


def measure(
    reference_python: str,
    backend: str,
    synchronous: str,
    workdir: Path,
    rounds: int,
    seconds: float,
    url: str = REDIS_URL,
) -> Row:
    """Both children on ``backend`` (at ``synchronous`` for a file), taking turns for
    ``rounds`` rounds."""
    places = _places(backend, synchronous, workdir, url)
    try:
        ours = _start("ours", sys.executable, places[0])
        try:
            reference = _start("reference", reference_python, places[1])
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
    finally:
        _clean(places)
    label = backend if backend == "redis" else f"{backend} (synchronous={synchronous})"
    return Row(label, backend, ours, reference)


def _table(rows: list[Row]) -> str:
    median = statistics.median
    lines = [
        "| backend | side | settings | commits/s (median, best) | wall µs/commit (median) "
        "| CPU µs/commit (median) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        for side in (row.ours, row.reference):
            settings = ", ".join(f"{k}={v}" for k, v in side.settings.items())
            lines.append(
                f"| {row.label} | {side.name} | {settings} | {median(side.rates):,.0f}, "
                f"{max(side.rates):,.0f} | {median(side.wall_us):.1f} | "
                f"{median(side.cpu_us):.1f} |"
            )
    lines += ["", "| backend | ours ÷ reference, median | best | CPU ÷ | target |"]
    lines.append("|---|---|---|---|---|")
    for row in rows:
        value, target = row.ratio(median), TARGETS[row.backend]
        cpu = median(row.reference.cpu_us) / median(row.ours.cpu_us)
        mark = "✓" if value >= target else "✗"
        lines.append(
            f"| {row.label} | {value:.2f}x | {row.ratio(max):.2f}x | {cpu:.2f}x "
            f"| ≥ {target}x {mark} |"
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
    parser.add_argument("--redis-url", default=REDIS_URL, help=f"default {REDIS_URL}")
    parser.add_argument("--child", choices=("ours", "reference"), help=argparse.SUPPRESS)
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    parser.add_argument("--drop", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.drop:
        _drop_prefix(args.redis_url, args.drop)
        return 0
    if args.child:
        backend = args.backend[0]
        synchronous = args.synchronous[0] if args.synchronous else None
        place = Place(backend, args.path, synchronous, args.redis_url, args.prefix or "")
        _child(args.child, place)
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
            settings = ("-",) if backend == "redis" else args.synchronous or SETTINGS
            for synchronous in settings:
                row = measure(
                    reference_python,
                    backend,
                    synchronous,
                    workdir,
                    args.rounds,
                    args.seconds,
                    args.redis_url,
                )
                rows.append(row)
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
