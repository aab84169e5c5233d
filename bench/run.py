"""``make bench``: the figures of issues 10, 16 and 20 over every installed backend; RESULTS.md.

1. round trips per operation (a counting proxy between store and server);
2. commit throughput against the driver's raw equivalent, sync and async;
3. cost of each operation as the stored data grows (and ``growth.png``);
4. the durable runner's overhead over bare commits, and the engine's own speed;
5. throughput and conflicts with many tasks and several processes;
6. a fleet of ``harel worker`` processes draining due work, and timer lateness (issue 16);
7. runner events per second through a slow (1 ms each way) proxy, with and without the
   runner's kept copies (issue 20).

A backend joins by being installed: the registry lists it, its ``local_url`` (or
``HAREL_TEST_<NAME>_URL``) says where its data goes, and its harness gives each figure an
isolated dataset and the raw write.  Quick mode by default (a few minutes); ``--full`` for
longer samples and 100k stored executions.  Measures only: the exit status is non-zero only
when a figure could not be measured.

    python bench/run.py [--full] [--backend NAME]... [--figure N]... [--budget SECONDS]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path

import concurrency
import fleet
import growth
import latency
import overhead
import roundtrips
import throughput
from anatomy import anatomy, commit_anatomy, redis_anatomy
from common import FULL, QUICK, open_harness, targets
from report import Results, plot, render

HERE = Path(__file__).resolve().parent


def _say(text: str) -> None:
    print(text, flush=True)


def run(args: argparse.Namespace, results: Results, workdir: Path) -> None:
    """Measure the figures asked for, backend by backend, into ``results``."""
    mode, only, figures = results.mode, args.backend or None, set(args.figure or range(1, 8))
    plain = targets(workdir, only, every_setting=False)
    if 1 in figures:
        for target in plain:
            _say(f"[1 round trips] {target.label}")
            results.roundtrips.append(roundtrips.measure(target, workdir / "rt" / target.label))
    if 2 in figures:
        for target in targets(workdir, only, every_setting=True):
            _say(f"[2 throughput] {target.label}")
            where = workdir / "tp" / target.label
            results.throughput.append(throughput.measure(target, where, mode))
        anatomies = {"sqlite": ("anatomy", anatomy), "redis": ("redis_anatomy", redis_anatomy)}
        for target in plain:
            if target.backend not in anatomies:
                continue
            field, measure_parts = anatomies[target.backend]
            _say(f"[2 anatomy] {target.label}")
            try:
                with open_harness(target, workdir / "an") as harness:
                    setattr(results, field, measure_parts(harness, mode.seconds, mode.rounds))
            except Exception as exc:  # reported, the other figures go on
                results.anatomy_error = f"{target.backend}: {type(exc).__name__}: {exc}"[:300]
        for target in plain:
            _say(f"[2 anatomy, every backend] {target.label}")
            try:
                with open_harness(target, workdir / "an-all" / target.label) as harness:
                    parts = commit_anatomy(harness, mode.seconds, mode.rounds)
            except Exception as exc:  # reported, the other figures go on
                results.anatomy_error = f"{target.backend}: {type(exc).__name__}: {exc}"[:300]
                continue
            if parts:
                results.anatomies[target.label] = parts
    if 3 in figures:
        for target in plain:
            _say(f"[3 growth] {target.label}")
            results.growth.append(growth.measure(target, workdir / "gr" / target.label, mode))
    if 4 in figures:
        for target in plain:
            if target.backend in overhead.BACKENDS:
                _say(f"[4 runner] {target.label}")
                where = workdir / "ov" / target.label
                results.overhead.append(overhead.measure(target, where, mode))
    if 5 in figures:
        for target in plain:
            shared = mode is FULL or target.backend in concurrency.QUICK_PROCESS_BACKENDS
            _say(f"[5 concurrency] {target.label}")
            where = workdir / "cc" / target.label
            results.concurrency.append(concurrency.measure(target, where, mode, processes=shared))
    if 6 in figures:
        for target in plain:
            if target.backend in fleet.BACKENDS:
                _say(f"[6 fleet] {target.label}")
                results.fleet.append(fleet.measure(target, workdir / "fl" / target.label, mode))
    if 7 in figures:
        for target in plain:
            _say(f"[7 latency] {target.label}")
            where = workdir / "la" / target.label
            results.latency.append(latency.measure(target, where, mode))


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run, write RESULTS.md (and growth.png); 1 if a figure failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="long samples, up to 100k executions")
    parser.add_argument("--backend", action="append", help="only this backend (repeatable)")
    parser.add_argument("--figure", action="append", type=int, choices=range(1, 8))
    parser.add_argument("--budget", type=float, help="seconds of population per backend")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args(argv)
    mode = FULL if args.full else QUICK
    if args.budget is not None:
        mode = dataclasses.replace(mode, budget=args.budget)
    command = "make bench" + (" BENCH_ARGS=--full" if args.full else "")
    if argv is None and sys.argv[1:] not in ([], ["--full"]):
        command = "python bench/run.py " + " ".join(sys.argv[1:])
    results = Results(mode, command, dt.datetime.now().strftime("%Y-%m-%d %H:%M"))
    results.load.append(os.getloadavg())
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="harel-bench-") as tmp:
        run(args, results, Path(tmp))
    results.seconds = time.perf_counter() - started
    results.load.append(os.getloadavg())
    plot(results, args.out.parent / "growth.png")
    args.out.write_text(render(results))
    _say(f"wrote {args.out} ({results.seconds:.0f} s)")
    for line in results.misses:
        _say(f"  missed: {line}")
    errors = results.errors()
    for line in errors:
        _say(f"  ERROR: {line}")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
