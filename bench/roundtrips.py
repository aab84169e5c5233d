"""Figure 1: network round trips per store operation, sync and async.

The store is opened through the registry on a URL whose server address points at a
:class:`~harel.conformance.proxy.CountingProxy` (the ``host:port`` of the URL's netloc, or of a
URL-valued query parameter such as DynamoDB's ``endpoint_url``).  A backend whose harness
counts driver calls itself (``harness.counting()``: mongomock has no wire) is counted that
way; a backend whose URL names no server is embedded.  Every operation runs twice (a warm-up
pass, then the counted pass on fresh records), so connection set-up is never counted.

The durable runner's own calls are counted on a tiny toggle machine (no actions, no emits):
``runner.create`` with an explicit id, ``runner.process`` of an execution that runner created
(stepped from its kept copy: one ``commit``) and ``runner.process unseen`` by a second runner
on the same store that never stored it (``load_for_event`` + ``commit``).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from common import Target, execution, open_harness, side_writes, ten_spawns
from harel.conformance.harness import StoreHarness
from harel.conformance.proxy import CountingProxy
from harel.engine import AsyncDurableRunner, DurableRunner, definition_from_dsl
from harel.model import Event, Status
from harel.registry import open_async_store, open_store
from overhead import TOGGLE

OPERATIONS = (
    "load",
    "load_for_event",
    "commit state-only",
    "commit emit+mark+timer+trace",
    "commit 10 spawns",
    "enqueue",
    "due_timers",
    "pending_outbox",
    "claim",
    "renew",
    "release",
    "list_executions page",
    "purge",
    "runner.create",
    "runner.process",
    "runner.process unseen",
)
COMMITS = OPERATIONS[2:5]
COMMIT_TARGETS = {"redis": 1, "postgres": 1, "rqlite": 1, "dynamodb": 1, "mongo": 2}
"""Most round trips (driver calls on mongomock) a commit of any shape may take."""
RUNNER_TARGETS: dict[str, dict[str, int]] = {
    "runner.create": {"redis": 1, "postgres": 1, "rqlite": 1, "dynamodb": 1, "mongo": 1},
    "runner.process": {"redis": 1, "postgres": 1, "rqlite": 1, "dynamodb": 1, "mongo": 2},
}
"""Most round trips (driver calls on mongomock) ``runner.create`` with an explicit id and
``runner.process`` from the runner's kept copy may take (``runner.process unseen`` has none:
it loads first, by design)."""

CLAIM_NOW = 1e15
"""The ``now`` of the counted claim: every timer the script armed is due."""

Step = tuple[str | None, Callable[[Any], Any]]
"""``(operation counted, or None for set-up; call on the store)``."""


@dataclass
class RoundTrips:
    """One backend's counts: ``counts[flavour][operation]``, or why there are none."""

    target: Target
    how: str  # "proxy", "driver calls", or why nothing was counted
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    error: str | None = None


def proxied(url: str, port: int) -> tuple[str, str, int] | None:
    """``(url through 127.0.0.1:port, original host, original port)``, or ``None`` when no
    ``host:port`` appears in the netloc or in a URL-valued query parameter."""
    parts = urlsplit(url)
    if parts.port is not None and parts.hostname:
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{port}" if userinfo else f"127.0.0.1:{port}"
        return urlunsplit(parts._replace(netloc=netloc)), parts.hostname, parts.port
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    for index, (key, value) in enumerate(pairs):
        inner = urlsplit(value)
        if inner.scheme and inner.port is not None and inner.hostname:
            swapped = urlunsplit(inner._replace(netloc=f"127.0.0.1:{port}"))
            pairs[index] = (key, swapped)
            query = urlencode(pairs)
            return urlunsplit(parts._replace(query=query)), inner.hostname, inner.port
    return None


@dataclass(frozen=True)
class Runners:
    """Two runners over the store under count: ``own`` creates and steps the runner's
    execution (from its kept copy), ``stranger`` never stored it (it loads first)."""

    own: Any
    stranger: Any
    definition_id: str


def runners(store: Any, *, asynchronous: bool) -> Runners:
    """An own and a stranger runner (``AsyncDurableRunner`` when ``asynchronous``) over
    ``store`` with the toggle definition, keeping copies as by default."""
    defn = definition_from_dsl(TOGGLE)
    kind: Any = AsyncDurableRunner if asynchronous else DurableRunner
    return Runners(kind(store, {defn.id: defn}), kind(store, {defn.id: defn}), defn.id)


def script(tag: str, run: Runners) -> list[Step]:
    """Set-up and counted calls over fresh records named after ``tag``; the runner's calls
    come last, on an execution of their own, so they change no other count."""
    exe = execution(f"rt-{tag}")
    done = execution(f"rt-{tag}-done", status=Status.DONE)
    toggle = f"rt-{tag}-toggle"
    return [
        (None, lambda s: s.commit(exe, [])),
        (None, lambda s: s.commit(done, [])),
        ("load", lambda s: s.load(exe.id)),
        ("load_for_event", lambda s: s.load_for_event(exe.id, f"{tag}-unseen")),
        ("commit state-only", lambda s: s.commit(exe, [])),
        ("commit emit+mark+timer+trace", lambda s: s.commit(exe, **side_writes(exe, exe.version))),
        ("commit 10 spawns", lambda s: s.commit(exe, **ten_spawns(exe, 0))),
        ("enqueue", lambda s: s.enqueue(exe.id, Event(id=f"{tag}-q", kind="Go"))),
        ("due_timers", lambda s: s.due_timers(time.time(), limit=100)),
        ("pending_outbox", lambda s: s.pending_outbox(limit=100)),
        # the side-write commit armed a timer: exe's group is due at CLAIM_NOW
        ("claim", lambda s: s.claim(f"rt-{tag}", CLAIM_NOW, lease=30.0, limit=100)),
        ("renew", lambda s: s.renew(f"rt-{tag}", exe.id, CLAIM_NOW, lease=30.0)),
        ("release", lambda s: s.release(f"rt-{tag}", exe.id)),
        ("list_executions page", lambda s: s.list_executions(limit=50)),
        ("purge", lambda s: s.purge(done.id)),
        ("runner.create", lambda s: run.own.create(run.definition_id, execution_id=toggle)),
        ("runner.process", lambda s: run.own.process(toggle, Event(kind="Go"))),
        ("runner.process unseen", lambda s: run.stranger.process(toggle, Event(kind="Go"))),
    ]


class Meter:
    """Counts what one call costs: proxy round trips or the harness's driver calls."""

    def __init__(
        self,
        proxy: CountingProxy | None = None,
        counting: Callable[[], AbstractContextManager[list[Any]]] | None = None,
    ) -> None:
        self.proxy, self.counting = proxy, counting

    @contextmanager
    def measure(self, into: dict[str, int], name: str) -> Iterator[None]:
        """Count the calls made inside the block into ``into[name]``."""
        if self.proxy is not None:
            self.proxy.reset()
            yield
            into[name] = self.proxy.round_trips
            return
        assert self.counting is not None
        with self.counting() as seen:
            yield
        into[name] = len(seen)


def run_sync(store: Any, meter: Meter) -> dict[str, int]:
    """The script twice on a sync store; the counts of the second pass."""
    counts: dict[str, int] = {}
    run = runners(store, asynchronous=False)
    for tag in ("warm-s", "counted-s"):
        for name, call in script(tag, run):
            if name is None or tag == "warm-s":
                call(store)
                continue
            with meter.measure(counts, name):
                call(store)
    return counts


async def run_async(store: Any, meter: Meter) -> dict[str, int]:
    """The script twice on an async store; the counts of the second pass."""
    counts: dict[str, int] = {}
    run = runners(store, asynchronous=True)
    for tag in ("warm-a", "counted-a"):
        for name, call in script(tag, run):
            if name is None or tag == "warm-a":
                await call(store)
                continue
            with meter.measure(counts, name):
                await call(store)
    return counts


async def _close(store: Any) -> None:
    result = store.close()
    if inspect.isawaitable(result):
        await result


def _count(harness: StoreHarness, result: RoundTrips) -> None:
    url = harness.url()
    counting = getattr(harness, "counting", None)
    route = proxied(url, 0) if url else None
    if route is None:
        if not callable(counting):
            result.how = "embedded (no network)"
            return
        result.how = "driver calls (no wire to count)"
        meter = Meter(counting=counting)
        sync_store: Any = harness.open_sync()
        result.counts["sync"] = run_sync(sync_store, meter)
        sync_store.close()

        async def on_async() -> None:
            store = await harness.open_async()
            result.counts["async"] = await run_async(store, meter)
            await _close(store)

        asyncio.run(on_async())
        return
    assert url is not None
    _, host, port = route
    with ExitStack() as stack:
        proxy = stack.enter_context(CountingProxy(host, port))
        through = proxied(url, proxy.port)
        assert through is not None
        result.how = "proxy round trips"
        meter = Meter(proxy=proxy)
        store = open_store(through[0])
        stack.callback(store.close)
        result.counts["sync"] = run_sync(store, meter)

        async def on_async_proxied() -> None:
            astore = await open_async_store(through[0])
            try:
                result.counts["async"] = await run_async(astore, meter)
            finally:
                await _close(astore)

        asyncio.run(on_async_proxied())


def measure(target: Target, workdir: Path) -> RoundTrips:
    """Figure 1 for one backend (an error is reported, not raised)."""
    result = RoundTrips(target, how="")
    try:
        with open_harness(target, workdir) as harness:
            _count(harness, result)
    except Exception as exc:  # a benchmark reports a broken backend and goes on
        result.error = f"{type(exc).__name__}: {exc}"[:300]
    return result
