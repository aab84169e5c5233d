"""RESULTS.md and the growth plot: one table per figure, each figure with its target and marks."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

import concurrency
import fleet
import growth
import latency
import overhead
import roundtrips
import throughput
from common import Mode, ratio_mark

FINDINGS = Path(__file__).resolve().parent / "FINDINGS.md"


@dataclass
class Results:
    """Everything one run measured, by figure, plus the run's context."""

    mode: Mode
    command: str
    started: str
    seconds: float = 0.0
    load: list[tuple[float, float, float]] = field(default_factory=list)
    roundtrips: list[roundtrips.RoundTrips] = field(default_factory=list)
    throughput: list[throughput.Throughput] = field(default_factory=list)
    growth: list[growth.Growth] = field(default_factory=list)
    overhead: list[overhead.Overhead] = field(default_factory=list)
    concurrency: list[concurrency.Concurrency] = field(default_factory=list)
    fleet: list[fleet.Fleet] = field(default_factory=list)
    latency: list[latency.Latency] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    anatomy: dict[str, float] = field(default_factory=dict)
    redis_anatomy: dict[str, float] = field(default_factory=dict)
    anatomies: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per backend label: :func:`anatomy.commit_anatomy`'s µs per loop."""
    anatomy_error: str | None = None

    def errors(self) -> list[str]:
        """``label: error`` of every figure that could not be measured."""
        figures: list[
            list[roundtrips.RoundTrips]
            | list[throughput.Throughput]
            | list[growth.Growth]
            | list[overhead.Overhead]
            | list[concurrency.Concurrency]
            | list[fleet.Fleet]
            | list[latency.Latency]
        ] = [
            self.roundtrips,
            self.throughput,
            self.growth,
            self.overhead,
            self.concurrency,
            self.fleet,
            self.latency,
        ]
        found = [f"{r.target.label}: {r.error}" for rows in figures for r in rows if r.error]
        return found + ([f"anatomy: {self.anatomy_error}"] if self.anatomy_error else [])


def machine() -> str:
    """Cores, CPU model, memory, OS and Python of this machine."""
    model, memory = platform.processor() or platform.machine(), "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 1024**2:.1f} GiB"
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores ({model}), {memory} memory, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}"
    )


def _n(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _roundtrips(results: Results) -> list[str]:
    out = [
        "## 1. Round trips per operation",
        "",
        "Counted by a loopback proxy between store and server (`CountingProxy`), on the",
        "second of two passes.  **Target:** every commit shape = 1 round trip on Redis,",
        "PostgreSQL, rqlite and DynamoDB; ≤ 2 on MongoDB (mongomock has no wire: its",
        "harness's driver calls are counted instead).  The runner's columns drive a two-state",
        "toggle (no actions, no emits) through `DurableRunner` (sync) or `AsyncDurableRunner`",
        "(async): `runner.create` with an explicit id, `runner.process` of an execution that",
        "runner created (stepped from its kept copy: one `commit`), `runner.process unseen`",
        "by a second runner that never stored it (`load_for_event` + `commit`, no target).",
        "**Target:** `runner.create` = 1 and `runner.process` = 1 round trip on Redis,",
        "PostgreSQL, rqlite and DynamoDB; on MongoDB `runner.create` = 1 and",
        "`runner.process` ≤ 2 driver calls.",
        "",
    ]
    runner_ops = tuple(roundtrips.RUNNER_TARGETS)
    head = [
        "backend",
        "counted",
        "flavour",
        *roundtrips.OPERATIONS,
        "commit target",
        "✓/✗",
        "runner target",
        "✓/✗",
    ]
    rows: list[list[str]] = []
    for r in results.roundtrips:
        if r.error or not r.counts:
            rows.append([r.target.label, r.error or r.how, *[""] * (len(head) - 2)])
            continue
        limit = roundtrips.COMMIT_TARGETS.get(r.target.backend)
        limits = {op: roundtrips.RUNNER_TARGETS[op].get(r.target.backend) for op in runner_ops}
        for flavour, counts in r.counts.items():
            worst = max(counts.get(op, 0) for op in roundtrips.COMMITS)
            mark = "n/a" if limit is None else ratio_mark(worst, limit, at_most=True)
            if mark == "✗":
                results.misses.append(
                    f"round trips: {r.target.label} {flavour} commit takes {worst} (> {limit})"
                )
            rows.append(
                [
                    r.target.label,
                    r.how,
                    flavour,
                    *[str(counts.get(op, "")) for op in roundtrips.OPERATIONS],
                    "n/a" if limit is None else f"≤ {limit}",
                    mark,
                    *_runner_marks(results, r, flavour, counts, limits),
                ]
            )
    return [*out, *_table(head, rows), ""]


def _runner_marks(
    results: Results,
    r: roundtrips.RoundTrips,
    flavour: str,
    counts: dict[str, int],
    limits: dict[str, int | None],
) -> list[str]:
    """The runner target cell (``create ≤ 1, process ≤ 2``) and its mark, noting each miss;
    a runner operation with no count (not measured) is judged n/a."""
    judged = {op: limit for op, limit in limits.items() if limit is not None}
    if not judged:
        return ["n/a", "n/a"]
    marks: list[str] = []
    for op, limit in judged.items():
        got = counts.get(op)
        mark = ratio_mark(got, limit, at_most=True)
        marks.append(mark)
        if mark == "✗":
            results.misses.append(
                f"round trips: {r.target.label} {flavour} {op} takes {got} (> {limit})"
            )
    cell = ", ".join(f"{op.removeprefix('runner.')} ≤ {limit}" for op, limit in judged.items())
    mark = "✗" if "✗" in marks else ("n/a" if "n/a" in marks else "✓")
    return [cell, mark]


def _throughput(results: Results) -> list[str]:
    t = throughput
    out = [
        "## 2. Commit throughput against the raw driver",
        "",
        "Commits per second, one process, one dataset, loops taking turns (median of "
        f"{results.mode.rounds} rounds of {results.mode.seconds} s).  *plain raw* = what a "
        "user would write without this project (`bench/plain.py`): pydantic's "
        "`exe.model_dump_json()` + one CAS `UPDATE ... WHERE id = ? AND version = ?` of a "
        "plain four-column table (id, version, definition_id, document) in the same database "
        "with the same settings, autocommit (Redis: one plain `SET` of that JSON); *raw* = the "
        "project's own codec (`encode_execution`, payload checks) + the harness's "
        "`raw_commit()` (one CAS write of the store's own table in its own transaction; "
        "Redis: one `SET`), kept for reference; *side* = commit with one emit, a dedupe "
        "mark, a timer and a trace step; *raw side* = encode the execution, the event and "
        "the step + the harness's "
        "`raw_side_commit()` (the same rows written raw with the CAS in one transaction or "
        "atomic request); *async* = the async store, one task.  **Targets:** state-only ≥ "
        f"{t.STATE_VS_PLAIN}x plain raw (CPU-bound setting: SQLite/libSQL "
        "`synchronous=NORMAL`; a backend with no plain raw write is judged by commit÷raw ≥ "
        f"{t.STATE_VS_RAW}x instead, else commit÷raw is for reference, marked —), "
        f"side ≥ {t.SIDE_VS_RAW}x raw side, async ≥ {t.ASYNC_VS_SYNC}x sync.  *side÷raw* "
        "(the side commit against the state-only raw write) is for reference only.",
        "",
    ]
    head = [
        "backend",
        "plain raw/s",
        "raw/s",
        "raw side/s",
        "commit/s",
        "side/s",
        "async/s",
        "async side/s",
        "commit÷plain raw",
        "✓/✗",
        "commit÷raw",
        "✓/✗",
        "side÷raw side",
        "✓/✗",
        "side÷raw",
        "async÷sync",
        "✓/✗",
        "async side÷side",
        "✓/✗",
    ]
    rows: list[list[str]] = []
    for r in results.throughput:
        if r.error:
            rows.append([r.target.label, r.error, *[""] * (len(head) - 2)])
            continue
        plain = r.ratio("commit", "plain raw")
        checks: list[tuple[str, float | None, float | None]] = [
            ("commit÷plain raw", plain, t.STATE_VS_PLAIN),
            ("commit÷raw", r.ratio("commit", "raw"), t.STATE_VS_RAW if plain is None else -1.0),
            ("side÷raw side", r.ratio("commit+side", "raw+side"), t.SIDE_VS_RAW),
            ("side÷raw", r.ratio("commit+side", "raw"), None),
            ("async÷sync", r.ratio("async commit", "commit"), t.ASYNC_VS_SYNC),
            ("async side÷side", r.ratio("async commit+side", "commit+side"), t.ASYNC_VS_SYNC),
        ]
        cells: list[str] = []
        for name, value, target in checks:
            if target is None:
                cells.append(_x(value))
                continue
            if target < 0:  # measured against the plain raw write instead: for reference
                cells += [_x(value), "—"]
                continue
            mark = ratio_mark(value, target)
            if mark == "✗":
                results.misses.append(
                    f"throughput: {r.target.label} {name} = {_x(value)} (target ≥ {target}x)"
                )
            cells += [_x(value), mark]
        keys = (
            "plain raw",
            "raw",
            "raw+side",
            "commit",
            "commit+side",
            "async commit",
            "async commit+side",
        )
        rows.append([r.target.label, *[_n(r.rates.get(k)) for k in keys], *cells])
    out += [*_table(head, rows), ""]
    scripted = [r for r in results.throughput if r.rates.get("raw script")]
    for r in scripted:
        out.append(
            f"Extra information, {r.target.label}: the store's own state-only commit script "
            f"sent raw (`raw_script_commit()`, one `EVALSHA`) runs {_n(r.rates['raw script'])}/s"
            f"; commit ÷ it = {_x(r.ratio('commit', 'raw script'))}."
        )
    if scripted:
        out.append("")
    profiled = [r for r in results.throughput if r.profile]
    if profiled:
        out += [
            "Where a state-only commit's time goes when it misses the plain raw target: "
            "profiled µs per call by module, store commit vs the internal raw write "
            "(cProfile inflates Python code; "
            "`C:` = a C function, e.g. the driver's `execute`; socket waits = the server):",
            "",
        ]
        for r in profiled:
            shares = ", ".join(f"{name} {mine:.0f} vs {raw:.0f}" for name, mine, raw in r.profile)
            out.append(f"* **{r.target.label}**: {shares}")
        out.append("")
    return (
        out
        + _every_anatomy(results.anatomies)
        + _anatomy(results.anatomy)
        + _redis_anatomy(results.redis_anatomy)
    )


def _every_anatomy(anatomies: dict[str, dict[str, float]]) -> list[str]:
    """One row per backend: a state-only commit split into the parts every backend has."""
    if not anatomies:
        return []
    rows: list[list[str]] = []
    for label, us in sorted(anatomies.items()):
        plain = us.get("plain raw")
        rows.append(
            [
                label,
                f"{us['encode']:.1f}",
                f"{us['raw'] - us['encode']:.1f}",
                f"{us['store'] - us['raw']:.1f}",
                f"**{us['store']:.1f}**",
                "n/a" if plain is None else f"{us['pydantic']:.1f}",
                "n/a" if plain is None else f"{plain - us['pydantic']:.1f}",
                "n/a" if plain is None else f"{plain:.1f}",
            ]
        )
    head = [
        "backend",
        "encode (checks + JSON)",
        "raw CAS write of the store's record",
        "the store's extra (wider write + Python)",
        "**store commit**",
        "pydantic JSON",
        "plain CAS write",
        "plain raw total",
    ]
    return [
        "Every backend's state-only commit, part by part (`bench/anatomy.py`, "
        "`commit_anatomy`: µs per commit, best of the rounds, loops taking turns; each part the "
        "difference of two loops; mongomock (in-process) and moto (a local Python HTTP server) "
        "are stand-ins, so their parts measure the stand-in, not the real service):",
        "",
        *_table(head, rows),
        "",
    ]


def _anatomy(us: dict[str, float]) -> list[str]:
    if not us:
        return []
    parts = [
        ("encode the execution (payload checks + JSON)", us["encode"]),
        ("(of which the payload checks' fast path, `execution_ok`)", us["scan"]),
        ("one `UPDATE` of data + version, autocommit", us["raw"] - us["encode"]),
        (
            "the store's document-only `UPDATE` (a copy it stored, summary unchanged: "
            "`updated_at` and the receipt set too, the fence checked) instead",
            us["store SQL kept"] - us["raw"],
        ),
        (
            "(the narrow `UPDATE` it sends when the summary changed: "
            "`update_state`, 4 more columns set, 3 more checked, against the raw one)",
            us["store SQL"] - us["raw"],
        ),
        (
            "the commit envelope (version bump, token, fence and re-send bookkeeping)",
            us["envelope"] - us["encode"],
        ),
        (
            "the rest of the store's Python (plan, driver call)",
            us["store"] - us["store SQL kept"] - (us["envelope"] - us["encode"]),
        ),
    ]
    rows = [[what, f"{value:.1f}"] for what, value in parts]
    rows.append(["**`SqliteStore.commit`, state-only**", f"**{us['store']:.1f}**"])
    rows.append(["raw write of the table above (encode + one `UPDATE`)", f"{us['raw']:.1f}"])
    rows += _plain_rows(us, "one CAS `UPDATE` of the plain four-column table, autocommit")
    return [
        "SQLite state-only commit, part by part (`bench/anatomy.py`: each part is the "
        "difference of two loops measured side by side, synchronous=NORMAL; rows in "
        "parentheses are not part of the sum):",
        "",
        *_table(["part", "µs per commit"], rows),
        "",
    ]


def _plain_rows(us: dict[str, float], write: str) -> list[list[str]]:
    """The plain raw write's parts (pydantic encoding, then ``write``) and its total."""
    if "plain raw" not in us:
        return []
    return [
        ["plain raw: pydantic `model_dump_json()`", f"{us['pydantic']:.1f}"],
        [f"plain raw: {write}", f"{us['plain raw'] - us['pydantic']:.1f}"],
        ["**plain raw write (figure 2's headline baseline)**", f"**{us['plain raw']:.1f}**"],
    ]


def _redis_anatomy(us: dict[str, float]) -> list[str]:
    if not us:
        return []
    parts = [
        ("encode the execution (payload checks + JSON)", us["encode"]),
        (
            "the store's state-only script, sent raw (one `EVALSHA` round trip)",
            us["script"] - us["encode"],
        ),
        ("the store's Python: plan, commit envelope, checks", us["store"] - us["script"]),
    ]
    rows = [[what, f"{value:.1f}"] for what, value in parts]
    rows.append(["**`RedisStore.commit`, state-only**", f"**{us['store']:.1f}**"])
    rows += _plain_rows(us, "one plain `SET` (one round trip)")
    return [
        "Redis state-only commit, part by part (`bench/anatomy.py`, `redis_anatomy`: each "
        "part is the difference of two loops measured side by side, best of the rounds):",
        "",
        *_table(["part", "µs per commit"], rows),
        "",
    ]


def _growth(results: Results) -> list[str]:
    planned = list(results.mode.sizes)
    fallback = any(set(r.cost) - set(planned) for r in results.growth)
    out = [
        "## 3. Cost as the data grows",
        "",
        "Median ms of each call on the sync store (over "
        f"{results.mode.reps} calls) with that many stored executions, each with a dedupe "
        "mark, a far timer, a trace step and an acknowledged outbox entry; only a handful due "
        "or pending.  `prune_processed` finds nothing old enough to drop (the cost of looking). "
        "The executions are imported (`import_execution`, checked to store what a commit "
        "stores), PostgreSQL's on 8 threads with `synchronous_commit=off` (the figure measures "
        "the data structures, not the disk's WAL flush); see bench/README.md. "
        f"**Target:** cost at {planned[-1]:,} ≤ {growth.GROWTH_LIMIT:g}x cost at {planned[0]:,} "
        "(the ratio column: largest measured size ÷ smallest; the *fallback* column, when a "
        "planned size could not be populated within the budget: the cost at the size measured "
        "instead, the ratio then judged over that smaller span of data).",
        "",
        "![cost versus stored executions](growth.png)",
        "",
    ]
    extra = ["fallback: ms at size"] if fallback else []
    head = ["backend", "operation", *[f"{s:,} ms" for s in planned], *extra, "ratio", "✓/✗"]
    rows: list[list[str]] = []
    notes: list[str] = []
    for r in results.growth:
        if r.error:
            rows.append([r.target.label, r.error, *[""] * (len(head) - 2)])
            continue
        rate = f" (populated at {_n(r.populate_rate)} executions/s)" if r.populate_rate else ""
        notes += [f"* {r.target.label}{rate}: {why}" for why in r.skipped]
        if not r.cost:
            rows.append([r.target.label, "(no size reached: see below)", *[""] * (len(head) - 2)])
            continue
        for op in growth.OPERATIONS:
            ratio = r.ratio(op)
            full = max(r.cost, default=0) == planned[-1]
            mark = ratio_mark(ratio, growth.GROWTH_LIMIT, at_most=True)
            if mark == "✗":
                results.misses.append(f"growth: {r.target.label} {op} grows {_x(ratio)}")
            cost = [_n(r.cost.get(s, {}).get(op), 3) for s in planned]
            if fallback:
                off = sorted(set(r.cost) - set(planned))
                cost.append(", ".join(f"{_n(r.cost[s][op], 3)} at {s:,}" for s in off) or "")
            rows.append([r.target.label, op, *cost, _x(ratio), mark if full else f"({mark})"])
    out += _table(head, rows)
    if notes:
        out += ["", "Sizes left out (a mark in parentheses: the largest size was not reached):"]
        out += ["", *notes]
    return [*out, ""]


def _overhead(results: Results) -> list[str]:
    out = [
        "## 4. Runner overhead",
        "",
        "`DurableRunner.process` (a two-state toggle machine) against a bare `store.commit` of "
        "the same write (the same `Event` in, the same toggled document and dedupe mark out) "
        "on the same store, taking turns.  **Target:** "
        f"runner ≥ {overhead.RUNNER_VS_COMMIT}x bare commits.  *store share* = the part of the "
        "runner's time spent inside store calls; *calls/event* = the store calls it makes per "
        "event (x µs per call) and, for comparison, a bare commit timed through the same "
        "wrapper; *no relay* = `process(..., _relay=False)`, which now reads like *runner*: the "
        "runner already skips the relay sweeps after a step that wrote no relay work.",
        "",
    ]
    head = [
        "store",
        "runner events/s",
        "bare commits/s",
        "runner÷bare",
        "✓/✗",
        "no relay÷bare",
        "store share",
        "calls/event",
    ]
    rows: list[list[str]] = []
    engine: list[str] = []
    for r in results.overhead:
        if r.error:
            rows.append([r.target.label, r.error, *[""] * (len(head) - 2)])
            continue
        mark = ratio_mark(r.ratio, overhead.RUNNER_VS_COMMIT)
        if mark == "✗":
            results.misses.append(f"runner: {r.target.label} runner÷bare = {_x(r.ratio)}")
        calls = ", ".join(
            f"{name} {count:g} x {us:.0f} µs" for name, (count, us) in r.calls.items()
        )
        share = "n/a" if r.store_share is None else f"{r.store_share:.0%}"
        rows.append(
            [
                r.target.label,
                _n(r.rates.get("runner")),
                _n(r.rates.get("bare commit")),
                _x(r.ratio),
                mark,
                _x(r.what_if),
                share,
                calls,
            ]
        )
        engine.append(f"{_n(r.rates.get('engine'))} events/s (measured beside {r.target.label})")
    out += _table(head, rows)
    if engine:
        out += [
            "",
            "The engine on its own (`harel.engine.core.process` on an in-memory execution, no "
            "store): " + "; ".join(engine) + ".",
        ]
    return [*out, ""]


def _concurrency(results: Results) -> list[str]:
    out = [
        "## 5. Concurrency",
        "",
        "Async store, N tasks each committing to an execution of its own: commits/s in all "
        "(conflicts in parentheses, none expected).",
        "",
    ]
    head = ["backend", *[f"{n} task{'s' if n > 1 else ''}" for n in concurrency.TASKS]]
    rows: list[list[str]] = []
    for r in results.concurrency:
        if r.error and not r.tasks:
            rows.append([r.target.label, r.error, *[""] * (len(head) - 2)])
            continue
        rows.append([r.target.label, *[_pair(r.tasks.get(n)) for n in concurrency.TASKS]])
    out += [*_table(head, rows), ""]
    out += [
        f"Worker processes over one dataset, load + commit on {concurrency.SHARED} shared "
        "executions picked at random: commits/s in all (share of attempts refused with "
        "`StoreConflict`).",
        "",
    ]
    head = ["backend", *[f"{n} process{'es' if n > 1 else ''}" for n in concurrency.PROCESSES]]
    rows = [
        [r.target.label, *[_pair(r.processes.get(n)) for n in concurrency.PROCESSES]]
        for r in results.concurrency
        if r.processes
    ]
    return [*out, *_table(head, rows), ""]


def _fleet(results: Results) -> list[str]:
    if not results.fleet:
        return []
    f = fleet
    out = [
        "## 6. A fleet of workers",
        "",
        "Each drain seeds a fresh dataset with N executions holding a timer due now and N "
        "relayed events (outbox entries, one per target execution), starts the workers "
        "together (`python -m harel worker --store URL --definitions DIR --once --batch B`) "
        "and checks the store afterwards: nothing left due or pending, every timer fired once, "
        "every event delivered once.  Units/s = 2N ÷ the span from the first worker up (its "
        "banner) to the last one's exit; in parentheses the wall seconds from the first start, "
        "process start-ups included.  *wasted* = the workers' own count of deliveries refused "
        "with `StoreConflict` or found already done (dedupe mark set), per delivered unit, the "
        "worst run of the row.  **Targets:** never slower with more workers (K÷1 ≥ 1.00x); "
        f"4 workers ≥ {f.SCALE_TARGET}x one on PostgreSQL; wasted ≤ {f.WASTE_TARGET} per unit.",
        "",
    ]
    head = [
        "backend",
        "N + N",
        *[f"{n} worker{'s' if n > 1 else ''}" for n in f.WORKERS],
        *[f"{n}÷1" for n in f.WORKERS[1:]],
        "never slower",
        f"4÷1 ≥ {f.SCALE_TARGET}x",
        "wasted",
        "✓/✗",
    ]
    rows: list[list[str]] = []
    for r in results.fleet:
        if r.skipped or (r.error and not r.processes):
            rows.append([r.target.label, r.skipped or r.error or "", *[""] * (len(head) - 2)])
            continue
        ratios = [r.ratio(n) for n in f.WORKERS[1:]]
        slower = [n for n, x in zip(f.WORKERS[1:], ratios, strict=True) if x is not None and x < 1]
        never = "n/a" if all(x is None for x in ratios) else ("✗" if slower else "✓")
        if slower:
            results.misses.append(
                f"fleet: {r.target.label} slower with {', '.join(map(str, slower))} workers "
                "than with one"
            )
        scale = "n/a"
        if r.target.backend in f.SCALE_BACKENDS:
            scale = ratio_mark(r.ratio(4), f.SCALE_TARGET)
            if scale == "✗":
                results.misses.append(
                    f"fleet: {r.target.label} 4 workers = {_x(r.ratio(4))} one "
                    f"(target ≥ {f.SCALE_TARGET}x)"
                )
        waste = max((d.waste for d in r.processes.values()), default=None)
        rows.append(
            [
                r.target.label,
                f"{r.units:,} + {r.units:,}",
                *[_drain(r.processes.get(n)) for n in f.WORKERS],
                *[_x(x) for x in ratios],
                never,
                scale,
                _n(waste, 3),
                _waste_mark(results, r.target.label, "workers", waste),
            ]
        )
    out += [*_table(head, rows), ""]
    out += [
        "One process, `--concurrency C` (C claim loops on the async store in one event loop; "
        "`--concurrency 1` is the sync worker, as `harel worker` runs it): units/s (wall s).",
        "",
    ]
    head = [
        "backend",
        *[f"C = {n}" for n in f.CONCURRENCY],
        *[f"{n}÷1" for n in f.CONCURRENCY[1:]],
        "wasted",
        "✓/✗",
    ]
    rows = []
    for r in results.fleet:
        if not r.concurrency:
            continue
        one = r.concurrency.get(1)
        ratios = [
            None if one is None or n not in r.concurrency else r.concurrency[n].rate / one.rate
            for n in f.CONCURRENCY[1:]
        ]
        waste = max((d.waste for d in r.concurrency.values()), default=None)
        rows.append(
            [
                r.target.label,
                *[_drain(r.concurrency.get(n)) for n in f.CONCURRENCY],
                *[_x(x) for x in ratios],
                _n(waste, 3),
                _waste_mark(results, r.target.label, "--concurrency", waste),
            ]
        )
    out += [*_table(head, rows), ""]
    out += [
        f"Timer lateness at low load: one idle `harel worker` (its defaults), {f.LATE_TIMERS} "
        "timers (one per execution, at most N) due from *lead* s after the arming starts (at "
        f"least {f.LATE_LEAD:g}, more where arming is slow) over *spread* s (at least "
        f"{f.LATE_SPREAD:g}, more where one worker drains less than twice as fast), evenly "
        "spread; lateness = the firing commit's `updated_at` "
        f"(the worker's clock) - `fire_at`.  **Target:** p99 ≤ {f.LATE_TARGET_MS:g} ms on "
        f"{' and '.join(f.LATE_BACKENDS)}.",
        "",
    ]
    head = [
        "backend",
        "timers",
        "lead s",
        "spread s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "target",
        "✓/✗",
    ]
    rows = []
    for r in results.fleet:
        if not r.lateness:
            continue
        p99 = r.late(99)
        mark, target = "n/a", "n/a"
        if r.target.backend in f.LATE_BACKENDS:
            target = f"≤ {f.LATE_TARGET_MS:g}"
            mark = ratio_mark(p99, f.LATE_TARGET_MS, at_most=True)
            if mark == "✗":
                results.misses.append(f"fleet: {r.target.label} timer lateness p99 {_n(p99)} ms")
        late = [_n(r.late(50), 1), _n(p99, 1), _n(max(r.lateness), 1)]
        timing = [str(len(r.lateness)), f"{r.lead:.1f}", f"{r.spread:.1f}"]
        rows.append([r.target.label, *timing, *late, target, mark])
    out += _table(head, rows)
    failed = [r for r in results.fleet if r.error and r.processes]
    if failed:
        out += ["", *[f"* {r.target.label}: stopped by {r.error}" for r in failed]]
    return [*out, ""]


def _latency(results: Results) -> list[str]:
    if not results.latency:
        return []
    out = [
        "## 7. Events per second over a slow network",
        "",
        "Sync `DurableRunner.process` of a two-state toggle (no actions, no emits) through a "
        f"`CountingProxy` adding {latency.DELAY * 1000:g} ms each way, "
        f"{latency.EXECUTIONS} executions stepped round-robin, one event at a time.  *before* "
        "= `keep_copies=0` (`load_for_event` + `commit` per event), *after* = the default "
        "kept copies (the runner steps the execution it committed last: one `commit`); the "
        "two take turns, round after round, each on executions of its own created beforehand. "
        " Round trips per event = the proxy's count ÷ events.  No target: it shows what one "
        "round trip less per event is worth once the network costs something.",
        "",
    ]
    head = [
        "backend",
        "events a side",
        "before events/s",
        "after events/s",
        "after÷before",
        "round trips/event before",
        "after",
    ]
    rows: list[list[str]] = []
    for r in results.latency:
        if r.error or r.how:
            rows.append([r.target.label, r.error or r.how, *[""] * (len(head) - 2)])
            continue
        rows.append(
            [
                r.target.label,
                f"{r.events.get('after', 0):,}",
                _n(r.rate("before")),
                _n(r.rate("after")),
                _x(r.ratio),
                _n(r.per_event("before"), 2),
                _n(r.per_event("after"), 2),
            ]
        )
    return [*out, *_table(head, rows), ""]


def _drain(drain: fleet.Drain | None) -> str:
    if drain is None:
        return "n/a"
    passes = f", {drain.passes} passes" if drain.passes > 1 else ""
    return f"{drain.rate:,.0f} ({drain.wall:.1f} s{passes})"


def _waste_mark(results: Results, label: str, what: str, waste: float | None) -> str:
    mark = ratio_mark(waste, fleet.WASTE_TARGET, at_most=True)
    if mark == "✗":
        results.misses.append(f"fleet: {label} wasted {_n(waste, 3)} attempts per unit ({what})")
    return mark


def _pair(value: tuple[float, float] | None) -> str:
    return "n/a" if value is None else f"{value[0]:,.0f} ({value[1]:.1%})"


def render(results: Results) -> str:
    """The whole RESULTS.md."""
    load = results.load
    lines = [
        "# Benchmark results",
        "",
        f"* Command: `{results.command}` ({results.mode.name} mode), {results.seconds:.0f} s.",
        f"* Machine: {machine()}.",
        f"* Date: {results.started}.",
    ]
    if len(load) == 2:
        lines.append(
            f"* Load average (1 min) at the start {load[0][0]:.1f}, at the end {load[1][0]:.1f}: "
            "other work shared the machine, so absolute figures are noisy; the ratios, measured "
            "side by side in one run, are what the targets judge."
        )
    lines.append("")
    sections = (_roundtrips, _throughput, _growth, _overhead, _concurrency, _fleet, _latency)
    for section in sections:
        lines += section(results)
    lines += ["## Targets missed", ""]
    lines += [f"* {miss}" for miss in results.misses] or ["None."]
    errors = results.errors()
    if errors:
        lines += ["", "Figures that could not be measured:", ""]
        lines += [f"* {error}" for error in errors]
    if FINDINGS.exists():
        lines += ["", FINDINGS.read_text().strip()]
    return "\n".join(lines) + "\n"


def plot(results: Results, path: Path) -> bool:
    """Cost versus stored executions, one panel per operation, one line per backend."""
    measured = [r for r in results.growth if len(r.cost) >= 1]
    if not measured:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = growth.OPERATIONS
    columns = 4
    fig, axes = plt.subplots(
        (len(ops) + columns - 1) // columns, columns, figsize=(16, 8), squeeze=False
    )
    for index, op in enumerate(ops):
        ax = axes[index // columns][index % columns]
        for r in measured:
            sizes = sorted(r.cost)
            ax.plot(sizes, [r.cost[s][op] for s in sizes], marker="o", label=r.target.label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(op)
        ax.set_xlabel("stored executions")
        ax.set_ylabel("ms per call")
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6))
    fig.suptitle(f"Cost versus stored executions ({results.mode.name} mode, {results.started})")
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True
