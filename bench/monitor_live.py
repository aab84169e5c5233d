"""``harel monitor``'s live-update delay, as a browser sees it (issue 21; not a test, it
asserts nothing, and it is not part of ``make bench``).

For each ``--store`` (a backend name such as ``sqlite``, ``postgres``, ``redis``, or a URL;
default ``sqlite``) the bench takes a fresh, isolated dataset from the backend's own harness
(a temp SQLite file, a new PostgreSQL schema, a new Redis key prefix: the way every figure of
``bench/run.py`` gets one), serves it with ``harel monitor`` as a child process on a free
loopback port and opens pages in headless chromium (Debian's ``/usr/bin/chromium`` driven by
Playwright, the browser tests' switches).  Then, ``--samples`` times each (default 20):

* execution page: ``runner.process`` commits an event to the watched execution from this
  process; the delay runs from the commit's return to the moment the page's
  ``data-testid="version"`` element shows the new version (the page polls
  ``/api/version/{id}`` and reloads on a change);
* list page: ``runner.create`` stores a new execution (its id sorts first, so it is always on
  the first page); the delay runs to the moment its row is on the open list page (the page
  polls ``/api/summary`` and reloads when the fingerprint changes).

Before each sample the bench waits a random 0-2 s (``--seed``), so commits land at random
phases of the 2 s poll.  The DOM is watched with ``wait_for_function`` (polled every
``POLL_DOM_MS``), times are ``time.perf_counter``.  The request load is counted from
chromium's network events (DevTools protocol), leaving out what its cache served, so it is
what reached the server from one tab: while ``--idle`` seconds pass with nothing
committed, and over the samples (polls plus the reloads the changes caused).  Usage::

    python bench/monitor_live.py [--store sqlite|postgres|redis|URL]... [--samples 20]
        [--idle 30] [--seed 21]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harel.conformance import backend_test_url
from harel.engine.dsl import definition_from_dsl
from harel.engine.runner import DurableRunner
from harel.model import Event
from harel.registry import harness_for_url
from harel.store.common.urls import redact_url
from harel_testing.redis import free_port, terminate

if TYPE_CHECKING:
    from playwright.sync_api import Page

TOGGLE = """
event Flip { n: int }
machine toggle {
  initial Off
  state Off {}
  state On {}
  from Off to On on Flip
  from On to Off on Flip
}
"""
WATCHED = "watched"
"""The execution whose page is open; every execution-page sample commits one event to it."""

CHROMIUM = ("--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run")
CHROMIUM_QUIET = ("--disable-background-networking", "--disable-component-update")
"""Headless chromium as the browser tests run it: no sandbox (root in a container), no
network of its own."""

POLL_DOM_MS = 10
"""How often ``wait_for_function`` looks at the DOM (the figures' resolution)."""

SAMPLE_TIMEOUT_MS = 30_000
"""How long one sample may wait for the page before the bench gives up."""

HIDDEN_POLL_SECONDS = 10.0
"""``static/monitor.js``'s poll interval while a tab is hidden (headless tabs stay visible)."""

STARTUP_SECONDS = 60.0
"""How long the monitor may take to answer before the bench gives up."""


class BenchSetupError(RuntimeError):
    """The bench cannot run: no chromium, no Playwright, a store with no URL for another
    process, or a monitor that did not start."""


@dataclass
class Load:
    """The requests one tab sent to the server, by kind, since :meth:`restart`: read from
    chromium's own network events (DevTools protocol), leaving out what its cache served."""

    started: float = field(default_factory=time.perf_counter)
    kinds: Counter[str] = field(default_factory=Counter)
    sent: dict[str, str] = field(default_factory=dict)

    def restart(self) -> None:
        """Forget the counts; time from now."""
        self.started = time.perf_counter()
        self.kinds.clear()
        self.sent.clear()

    def sending(self, params: dict[str, Any]) -> None:
        """``Network.requestWillBeSent``: count ``poll`` (``/api/``), ``page`` (a document)
        or ``static``."""
        url = str(params["request"]["url"])
        kind = (
            "poll" if "/api/" in url else "page" if params.get("type") == "Document" else "static"
        )
        self.sent[str(params["requestId"])] = kind
        self.kinds[kind] += 1

    def from_cache(self, params: dict[str, Any]) -> None:
        """``Network.requestServedFromCache``: that request never reached the server."""
        kind = self.sent.pop(str(params["requestId"]), None)
        if kind is not None:
            self.kinds[kind] -= 1

    def per_minute(self) -> dict[str, float]:
        """Requests per minute of each kind since :meth:`restart`."""
        minutes = (time.perf_counter() - self.started) / 60
        return {kind: self.kinds[kind] / minutes for kind in ("poll", "page", "static")}


@dataclass(frozen=True)
class Figures:
    """One store's delays (seconds) and the request load of its tabs (per minute)."""

    label: str
    execution: list[float]
    listing: list[float]
    idle: dict[str, float]
    busy: dict[str, float]


def serving(base: str) -> bool:
    """Whether the monitor at ``base`` answers its summary endpoint right now."""
    try:
        urllib.request.urlopen(f"{base}/api/summary", timeout=2).close()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False
    return True


@contextmanager
def monitor(url: str, definitions: Path, log: Path) -> Iterator[str]:
    """``harel monitor`` serving ``url`` (its base address once it answers), stopped after."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "harel", "monitor", "--store", url]
    argv += ["--definitions", str(definitions), "--port", str(port)]
    with log.open("wb") as out:
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not serving(base):
            if child.poll() is not None or time.monotonic() > deadline:
                output = log.read_text(encoding="utf-8", errors="replace")
                raise BenchSetupError(f"harel monitor did not start:\n{output}")
            time.sleep(0.05)
        yield base
    finally:
        terminate(child)


def timed(change: Callable[[], object], page: Page, shown: str, arg: str) -> float:
    """Seconds from ``change()``'s return until ``shown(arg)`` is true in ``page``."""
    change()
    started = time.perf_counter()
    page.wait_for_function(shown, arg=arg, polling=POLL_DOM_MS, timeout=SAMPLE_TIMEOUT_MS)
    return time.perf_counter() - started


VERSION_SHOWN = (
    "v => { const el = document.querySelector('[data-testid=\"version\"]');"
    " return el !== null && el.textContent.trim() === v; }"
)
ROW_SHOWN = (
    "id => [...document.querySelectorAll('[data-testid=\"execution-row\"]')]"
    ".some(row => row.dataset.id === id)"
)


def sample(
    page: Page,
    rng: random.Random,
    samples: int,
    step: Callable[[int], tuple[Callable[[], object], str]],
    shown: str,
) -> list[float]:
    """``samples`` delays: each after a random 0-2 s pause, ``step(n)`` gives the change to
    make and the argument of ``shown`` that says the page shows it."""
    delays = []
    for n in range(samples):
        page.wait_for_timeout(rng.uniform(0.0, 2000.0))  # keeps Playwright delivering events
        change, arg = step(n)
        delays.append(timed(change, page, shown, arg))
    return delays


def measure(label: str, url: str, browser_path: str, args: argparse.Namespace) -> Figures:
    """Serve a fresh dataset of ``url``'s backend and time its pages."""
    from playwright.sync_api import sync_playwright

    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="monitor-live-") as scratch:
        work = Path(scratch)
        harness = harness_for_url(url, work / "data")
        try:
            store = harness.open_sync()
            try:
                shared = harness.url()
                if shared is None:
                    raise BenchSetupError(
                        f"{label}: its harness gives no URL another process opens"
                    )
                defn = definition_from_dsl(TOGGLE, "toggle")
                (work / "toggle.stm").write_text(TOGGLE, encoding="utf-8")
                runner = DurableRunner(store, {defn.id: defn}, trace=True)
                runner.create(defn.id, execution_id=WATCHED)
                with monitor(shared, work, work / "monitor.log") as base, sync_playwright() as pw:
                    context = pw.chromium.launch_persistent_context(
                        str(work / "profile"),
                        executable_path=browser_path,
                        headless=True,
                        args=[*CHROMIUM, *CHROMIUM_QUIET],
                    )
                    try:
                        load = Load()
                        page = context.new_page()
                        network = context.new_cdp_session(page)
                        network.on("Network.requestWillBeSent", load.sending)
                        network.on("Network.requestServedFromCache", load.from_cache)
                        network.send("Network.enable")
                        page.goto(f"{base}/executions/{WATCHED}")
                        load.restart()
                        page.wait_for_timeout(args.idle * 1000)
                        idle = load.per_minute()
                        load.restart()

                        def flip(n: int) -> tuple[Callable[[], object], str]:
                            event = Event(kind="Flip", data={"n": n})
                            return (lambda: runner.process(WATCHED, event)), str(n + 2)

                        execution = sample(page, rng, args.samples, flip, VERSION_SHOWN)
                        busy = load.per_minute()
                        page.goto(f"{base}/")

                        def create(n: int) -> tuple[Callable[[], object], str]:
                            new_id = f"new-{999_999 - n:06d}"  # sorts before every earlier one
                            return (lambda: runner.create(defn.id, execution_id=new_id)), new_id

                        listing = sample(page, rng, args.samples, create, ROW_SHOWN)
                    finally:
                        context.close()
            finally:
                store.close()
        finally:
            harness.destroy()
    return Figures(label, execution, listing, idle, busy)


def quantiles(delays: list[float]) -> str:
    """``min / median / p90 / max`` of ``delays``, in ms."""
    ordered = sorted(delays)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    points = (ordered[0], statistics.median(ordered), p90, ordered[-1])
    return " / ".join(f"{point * 1000:,.0f}" for point in points)


def report(figures: Figures, samples: int) -> None:
    """Print one store's figures."""
    idle, busy = figures.idle, figures.busy
    print(f"{figures.label}: {samples} samples each, ms (min / median / p90 / max)")
    print(f"  execution page shows a committed version   {quantiles(figures.execution)}")
    print(f"  list page shows a new execution            {quantiles(figures.listing)}")
    print(
        f"  one idle execution tab: {idle['poll']:.1f} polls/min, {idle['page']:.1f} page loads/min"
    )
    print(
        f"  one execution tab while sampling: {busy['poll']:.1f} polls/min, "
        f"{busy['page']:.1f} page loads/min, {busy['static']:.1f} static files/min"
    )
    print(f"  a hidden tab (not measured): {60 / HIDDEN_POLL_SECONDS:.0f} polls/min at most")


def store_url(name_or_url: str, workdir: Path) -> str:
    """A URL for ``--store``: a URL as it is, a backend name resolved as the bench does."""
    if "://" in name_or_url:
        return name_or_url
    url = backend_test_url(name_or_url, workdir / name_or_url)
    if url is None:
        raise BenchSetupError(
            f"backend {name_or_url!r} has no URL to use: pass --store URL or set "
            f"HAREL_TEST_{name_or_url.upper()}_URL"
        )
    return url


def find_chromium() -> str:
    """Debian's chromium, and Playwright importable (else a message saying what to install)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise BenchSetupError("the bench needs chromium: apt-get install chromium")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        raise BenchSetupError("the bench needs playwright: make install (the dev group)") from None
    return found


def main() -> None:
    """Measure every ``--store``, print as each finishes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", action="append", help="backend name or URL (default: sqlite)")
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of idle polling")
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()
    if args.samples < 1 or args.idle <= 0:
        parser.error("--samples must be at least 1 and --idle above 0")
    try:
        browser_path = find_chromium()
        with tempfile.TemporaryDirectory(prefix="monitor-live-urls-") as scratch:
            for name in args.store or ["sqlite"]:
                url = store_url(name, Path(scratch))
                label = name if "://" not in name else redact_url(name)
                report(measure(label, url, browser_path, args), args.samples)
    except BenchSetupError as err:
        raise SystemExit(f"monitor_live: {err}") from None


if __name__ == "__main__":
    main()
