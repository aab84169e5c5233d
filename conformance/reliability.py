"""``make reliability``: the attack suite at full size over every installed backend.

For each backend with status ``ok`` (its data where ``HAREL_TEST_<NAME>_URL`` or its declared
``local_url`` says), on a fresh isolated dataset from its own harness:

* threads, asyncio tasks and (multi-process backends) processes racing commits on one execution;
* a writer SIGKILLed at random moments (>= 50 runs per durable backend);
* ``harel worker`` processes SIGKILLed mid-run;
* commits whose request or reply is lost, or whose connection is cut after forwarding, with a
  rival commit in between (every backend whose harness has a ``server_address()``);
* the kit's hostile-input round-trip law and cancellation storm with the ``reliability``
  hypothesis profile (>= 10,000 generated inputs per backend);
* ``harel migrate`` between every ordered pair of those backends: a population the runner
  left mid-flight, migrated, migrated again (nothing moves), then run to its end on both
  stores, which must end alike (:func:`harel.migrate.rehearsal.rehearse`).

The figures (runs, inputs, failures, data lost) go to ``conformance/RELIABILITY.md``; the exit
status is non-zero when any attack failed or lost data.  ``--quick`` runs the reduced sizes of
``make test``; ``--backend NAME`` (repeatable) limits the run; ``--no-migrate`` skips the
migration matrix.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harel.conformance import attacks, backend_test_url, usable_backend_names
from harel.conformance.attacks import AttackResult
from harel.conformance.harness import StoreHarness
from harel.conformance.profiles import (
    RELIABILITY,
    RELIABILITY_CANCELLATIONS,
    RELIABILITY_EXAMPLES,
)
from harel.migrate.rehearsal import rehearse
from harel.registry import harness_for_url

HERE = Path(__file__).resolve().parent
REPORT = HERE / "RELIABILITY.md"
KIT_PARTS = (
    ("round-trip law (kit)", "hostile_input", RELIABILITY_EXAMPLES),
    ("cancellation storm (kit)", "Cancellation", RELIABILITY_CANCELLATIONS),
)
"""(attack, pytest -k selection of kit tests, inputs each passed test tried)."""


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How big each attack is."""

    writers: int
    wins: int
    kill_runs: int
    jobs: int
    worker_kills: int
    lost_replies: int
    kit: bool


FULL = Sizes(writers=8, wins=25, kill_runs=50, jobs=100, worker_kills=5, lost_replies=60, kit=True)
QUICK = Sizes(writers=4, wins=5, kill_runs=3, jobs=15, worker_kills=1, lost_replies=6, kit=False)
MIGRATION_SCALE = 2
"""Executions of each mid-flight kind the migration matrix moves per pair (x7 kinds)."""


def _attacks(
    sizes: Sizes, shared: bool, networked: bool, workdir: Path
) -> list[Callable[[StoreHarness], AttackResult]]:
    plan: list[Callable[[StoreHarness], AttackResult]] = [
        lambda h: attacks.race_threads(h, writers=sizes.writers, wins=sizes.wins),
        lambda h: attacks.race_tasks(h, writers=sizes.writers * 2, wins=sizes.wins),
    ]
    if networked:
        plan.append(lambda h: attacks.lost_replies(h, trials=sizes.lost_replies))
    if shared:
        plan += [
            lambda h: attacks.race_processes(
                h, writers=max(2, sizes.writers // 2), wins=sizes.wins
            ),
            lambda h: attacks.kill_writer(h, runs=sizes.kill_runs),
            lambda h: attacks.kill_workers(
                h,
                workdir / "workers",
                jobs=sizes.jobs,
                kills=sizes.worker_kills,
                stalls=sizes.worker_kills,
            ),
        ]
    return plan


def run_kit_part(url: str, workdir: Path, attack: str, selection: str, each: int) -> AttackResult:
    """Kit tests selected by ``selection`` with the ``reliability`` hypothesis profile."""
    result = AttackResult(attack)
    started = time.perf_counter()
    code = (
        "import json, sys\n"
        "from harel.conformance import run_conformance\n"
        "raise SystemExit(run_conformance(sys.argv[1], json.loads(sys.argv[2])))\n"
    )
    args = f'["-q", "-p", "no:cacheprovider", "--harel-strict", "-k", "{selection}"]'
    env = {**os.environ, "HYPOTHESIS_PROFILE": RELIABILITY}
    proc = subprocess.run(
        [sys.executable, "-c", code, url, args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    tail = proc.stdout.strip().splitlines()[-1:] or [""]
    passed = _count(tail[0], "passed")
    result.runs = passed
    result.inputs = passed * each
    if proc.returncode != 0:
        result.failures.append(f"kit exited {proc.returncode}: {tail[0]}")
    result.seconds = time.perf_counter() - started
    return result


def _count(summary: str, word: str) -> int:
    parts = summary.replace(",", " ").split()
    for index, part in enumerate(parts[1:], start=1):
        if part == word and parts[index - 1].isdigit():
            return int(parts[index - 1])
    return 0


def run_backend(name: str, sizes: Sizes, root: Path) -> list[AttackResult]:
    """Every attack against one backend, each on a fresh dataset of its harness."""
    workdir = root / name
    url = backend_test_url(name, workdir / "data")
    if url is None:
        failed = AttackResult("setup")
        failed.failures.append(f"no URL: set HAREL_TEST_{name.upper()}_URL")
        return [failed]
    # What this TEST setup can share between processes is the harness's word, not the
    # backend's: MongoDB's test harness runs on in-process mongomock, for example.
    probe = harness_for_url(url, workdir / "probe")
    try:
        caps = probe.capabilities
        shared = probe.url() is not None and caps.persistent and caps.multi_process
        networked = probe.server_address() is not None
    finally:
        probe.destroy()
    results = []
    for index, attack in enumerate(_attacks(sizes, shared, networked, workdir)):
        harness = harness_for_url(url, workdir / f"kit-{index}")
        try:
            results.append(attack(harness))
        except Exception as exc:  # an attack that crashes is a failure
            crashed = AttackResult(f"attack {index}")
            crashed.failures.append(repr(exc))
            results.append(crashed)
        finally:
            harness.destroy()
    if sizes.kit:
        (workdir / "kit").mkdir(parents=True, exist_ok=True)
        for label, selection, each in KIT_PARTS:
            results.append(run_kit_part(url, workdir / "kit", label, selection, each))
    return results


@dataclasses.dataclass
class MigrationRow:
    """One ordered pair of the migration matrix: records moved, problems found, time."""

    source: str
    destination: str
    records: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the rehearsal found nothing wrong."""
        return not self.problems


def _fresh_harness(name: str, workdir: Path) -> StoreHarness:
    url = backend_test_url(name, workdir / "data")
    if url is None:
        raise RuntimeError(f"no URL: set HAREL_TEST_{name.upper()}_URL")
    return harness_for_url(url, workdir / "kit")


def run_migration(source: str, destination: str, root: Path, scale: int) -> MigrationRow:
    """Rehearse ``harel migrate`` from ``source`` to ``destination``, each on a fresh dataset."""
    row = MigrationRow(source, destination)
    started = time.perf_counter()
    harnesses: list[StoreHarness] = []
    try:
        for side, name in (("src", source), ("dst", destination)):
            harnesses.append(_fresh_harness(name, root / f"{source}-{destination}" / side))
        src, dst = harnesses[0].open_sync(), harnesses[1].open_sync()
        try:
            result = rehearse(src, dst, scale=scale)
            row.records, row.problems = result.records, result.problems
        finally:
            src.close()
            dst.close()
    except Exception as exc:  # a pair that crashes is a failure
        row.problems.append(repr(exc))
    finally:
        for harness in harnesses:
            harness.destroy()
    row.seconds = time.perf_counter() - started
    return row


def run_migrations(names: list[str], root: Path, scale: int) -> list[MigrationRow]:
    """Every ordered pair of distinct backends in ``names``."""
    rows = []
    for source in names:
        for destination in names:
            if source != destination:
                rows.append(run_migration(source, destination, root, scale))
                status = "ok" if rows[-1].ok else f"FAILED ({len(rows[-1].problems)})"
                print(f"   migrate {source} -> {destination}: {status}", flush=True)
    return rows


def render_migrations(rows: list[MigrationRow], scale: int) -> list[str]:
    """The migration matrix section of RELIABILITY.md (no lines when it was not run)."""
    if not rows:
        return []
    lines = [
        "## Migration matrix",
        "",
        f"`harel migrate` between every ordered pair of the backends above: {scale} "
        "execution(s) of each mid-flight kind (armed timers, pending spawns and relays, a "
        "relay-only id, orthogonal children, finished orders) left by the runner on the "
        "source, migrated, migrated again (must move nothing), verified, then run to the end "
        "on both stores (same final records, each timer fired once, each effect once).",
        "",
        "| source | destination | records | problems | seconds |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row.source} | {row.destination} | {row.records} | {len(row.problems)} | "
            f"{row.seconds:.1f} |"
        )
    problems = [f"- {r.source} -> {r.destination}: {p}" for r in rows for p in r.problems]
    return [*lines, "", "### Migration failures", "", *(problems or ["None."]), ""]


def render(
    table: dict[str, list[AttackResult]],
    sizes: Sizes,
    seconds: float,
    command: str,
    migrations: list[MigrationRow] | None = None,
) -> str:
    """RELIABILITY.md: the command, the machine, the date and one row per backend x attack."""
    kit = (
        f"kit parts with the `{RELIABILITY}` profile ({RELIABILITY_EXAMPLES} generated inputs "
        f"per flavour of the round-trip law, {RELIABILITY_CANCELLATIONS} cancellations per "
        "cancellation test)"
        if sizes.kit
        else "kit parts not run (`--no-kit`)"
    )
    lines = [
        "# Reliability figures",
        "",
        f"Written by `{command}` on "
        f"{dt.date.today().isoformat()}, {os.cpu_count()} cores, "
        f"{platform.system()} {platform.machine()}, Python {platform.python_version()}; "
        f"{seconds:.0f} s in all.",
        "",
        f"Sizes: {sizes.writers} racing threads/processes, {sizes.writers * 2} tasks, "
        f"{sizes.wins} won commits each; {sizes.kill_runs} SIGKILLed writers; "
        f"{sizes.jobs} jobs under {sizes.worker_kills} worker kills and as many stalls past "
        "the lease; "
        f"{sizes.lost_replies} lost-reply trials per network backend; {kit}.",
        "",
        "| backend | attack | runs | inputs | failures | data lost | seconds |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, results in table.items():
        for r in results:
            lines.append(
                f"| {name} | {r.attack} | {r.runs} | {r.inputs} | {len(r.failures)} | "
                f"{r.lost} | {r.seconds:.1f} |"
            )
    problems = [
        f"- {name} / {r.attack}: {failure}"
        for name, results in table.items()
        for r in results
        for failure in r.failures
    ]
    lines += ["", "## Failures", "", *(problems or ["None."]), ""]
    lines += render_migrations(migrations or [], MIGRATION_SCALE)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the attacks, write the report, exit 1 on any failure or loss."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the reduced sizes of make test")
    parser.add_argument("--backend", action="append", help="only this backend (repeatable)")
    parser.add_argument("--report", type=Path, default=REPORT, help="where to write the table")
    parser.add_argument(
        "--no-kit", action="store_true", help="skip the kit parts (round-trip law, cancellations)"
    )
    parser.add_argument(
        "--no-migrate", action="store_true", help="skip the migration matrix (backend pairs)"
    )
    options = parser.parse_args(argv)
    sizes = QUICK if options.quick else FULL
    if options.no_kit:
        sizes = dataclasses.replace(sizes, kit=False)
    names = options.backend or usable_backend_names()
    started = time.perf_counter()
    command = " ".join(["python conformance/reliability.py", *(argv or sys.argv[1:])])
    table: dict[str, list[AttackResult]] = {}
    with tempfile.TemporaryDirectory(prefix="harel-reliability-") as tmp:
        for name in names:
            print(f"== {name}", flush=True)
            table[name] = run_backend(name, sizes, Path(tmp))
            for r in table[name]:
                status = "ok" if r.ok else f"FAILED ({len(r.failures)}, lost {r.lost})"
                print(f"   {r.attack}: {r.runs} runs, {r.inputs} inputs, {status}", flush=True)
            # written after every backend, so an interrupted run still leaves its figures
            options.report.write_text(render(table, sizes, time.perf_counter() - started, command))
        migrations: list[MigrationRow] = []
        if not options.no_migrate:
            print("== migration matrix", flush=True)
            migrations = run_migrations(names, Path(tmp) / "migrate", MIGRATION_SCALE)
            options.report.write_text(
                render(table, sizes, time.perf_counter() - started, command, migrations)
            )
    print(f"wrote {options.report}")
    attacks_ok = all(r.ok for results in table.values() for r in results)
    return 0 if attacks_ok and all(row.ok for row in migrations) else 1


if __name__ == "__main__":
    raise SystemExit(main())
