"""How long the conformance kit takes, in URL mode, to fail a store with one planted bug.

The bug: no version check on update (a stale ``exe.version`` overwrites the stored record
instead of raising ``StoreConflict``).  The script registers a run-time backend whose URLs are
``broken+<inner URL>`` (e.g. ``broken+sqlite:///kit.db``): stores and harness are the inner
backend's, with ``commit`` wrapped to skip the version check.  It then runs
``run_conformance`` (what ``harel conformance URL`` runs) on the broken and on the correct
store and prints the wall time, the exit code and the failure count of each::

    python bench/kit_broken_store.py [--inner sqlite:///kit.db] [--only broken|correct]
                                     [--show] [-- PYTEST_ARGS...]

A benchmark, not a test: it measures and asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from harel.conformance.harness import StoreHarness
from harel.model import Execution
from harel.registry import (
    StoreBackend,
    backend_for_url,
    harness_for_url,
    open_async_store,
    open_store,
    register,
)
from harel.store.contract import AsyncExecutionStore, Capabilities, ExecutionStore

PREFIX = "broken+"
SCHEMES = ("broken+sqlite", "broken+memory", "broken+jsondir")


def _inner(url: str) -> str:
    if not url.startswith(PREFIX):
        raise ValueError(f"not a {PREFIX}URL")
    return url[len(PREFIX) :]


class BrokenStore:
    """A sync store that commits updates without checking the version (the planted bug)."""

    capabilities: ClassVar[Capabilities | None] = None

    def __init__(self, inner: ExecutionStore) -> None:
        self._inner = inner

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> BrokenStore:
        """The inner URL's store, wrapped."""
        return cls(open_store(_inner(url), **knobs))

    def commit(self, exe: Execution, *args: Any, **kwargs: Any) -> None:
        """The inner commit, after overwriting ``exe.version`` with the stored one."""
        if exe.version:
            stored = self._inner.load(exe.id)
            if stored is not None:
                exe.version = stored.version
        self._inner.commit(exe, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class AsyncBrokenStore:
    """The async twin of :class:`BrokenStore`."""

    capabilities: ClassVar[Capabilities | None] = None

    def __init__(self, inner: AsyncExecutionStore) -> None:
        self._inner = inner

    @classmethod
    async def from_url(cls, url: str, **knobs: Any) -> AsyncBrokenStore:
        """The inner URL's async store, wrapped."""
        return cls(await open_async_store(_inner(url), **knobs))

    async def commit(self, exe: Execution, *args: Any, **kwargs: Any) -> None:
        """The inner commit, after overwriting ``exe.version`` with the stored one."""
        if exe.version:
            stored = await self._inner.load(exe.id)
            if stored is not None:
                exe.version = stored.version
        await self._inner.commit(exe, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class BrokenHarness(StoreHarness):
    """The inner backend's harness, its stores wrapped."""

    capabilities: ClassVar[Capabilities]

    def __init__(self, inner: StoreHarness) -> None:
        self.inner = inner

    def open_sync(self) -> ExecutionStore:
        """A wrapped store over the inner dataset."""
        store: Any = BrokenStore(self.inner.open_sync())
        return store  # type: ignore[no-any-return]

    async def open_async(self) -> AsyncExecutionStore:
        """A wrapped async store over the inner dataset."""
        store: Any = AsyncBrokenStore(await self.inner.open_async())
        return store  # type: ignore[no-any-return]

    def url(self) -> str | None:
        """The inner URL: another process opens the same dataset (with the broken wrapper)."""
        inner = self.inner.url()
        return None if inner is None else PREFIX + inner

    def footprint(self, execution_id: str) -> list[str]:
        """The inner footprint."""
        return self.inner.footprint(execution_id)

    def destroy(self) -> None:
        """Destroy the inner dataset."""
        self.inner.destroy()


def harness_from_url(url: str, workdir: Path) -> StoreHarness:
    """The inner URL's harness, its stores wrapped."""
    inner = harness_for_url(_inner(url), workdir)
    cls = type("BrokenHarness", (BrokenHarness,), {"capabilities": inner.capabilities})
    harness: StoreHarness = cls(inner)
    return harness


def install(inner_url: str) -> None:
    """Register the ``broken+`` backend (capabilities of ``inner_url``'s backend)."""
    caps = backend_for_url(inner_url).capabilities
    BrokenStore.capabilities = caps
    AsyncBrokenStore.capabilities = caps
    register(
        StoreBackend(
            name="broken",
            schemes=SCHEMES,
            store="kit_broken_store:BrokenStore",
            async_store="kit_broken_store:AsyncBrokenStore",
            capabilities=caps,
            distribution="harel-core",
            harness="kit_broken_store:harness_from_url",
            description="bench: a store without a version check on update",
        )
    )


def timed_run(
    url: str, pytest_args: Sequence[str], *, show: bool = False
) -> tuple[float, int, str]:
    """``(seconds, exit code, pytest's summary line)`` of ``run_conformance(url)``; ``show``
    also prints pytest's whole output (e.g. with ``--durations=20``)."""
    from harel.conformance.run import run_conformance

    out = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = run_conformance(url, ["-q", "-p", "no:randomly", *pytest_args])
    elapsed = time.perf_counter() - started
    if show:
        print(out.getvalue())
    summary = re.compile(r"\d+ (passed|failed)")
    lines = [line for line in out.getvalue().splitlines() if summary.search(line)]
    return elapsed, code, lines[-1].strip("= ") if lines else "(no summary)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the kit on the broken and on the correct store; print one line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inner", default=None, help="the correct store's URL")
    parser.add_argument("--only", choices=("broken", "correct"))
    parser.add_argument("--show", action="store_true", help="print pytest's whole output")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    sys.modules.setdefault("kit_broken_store", sys.modules[__name__])
    with tempfile.TemporaryDirectory(prefix="harel-bench-kit-") as tmp:
        inner = args.inner or f"sqlite:///{tmp}/kit.db"
        install(inner)
        runs = [("broken", PREFIX + inner), ("correct", inner)]
        for label, url in runs:
            if args.only not in (None, label):
                continue
            seconds, code, summary = timed_run(url, args.pytest_args, show=args.show)
            print(f"{label:8} {seconds:7.1f} s  exit {code}  {summary}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
