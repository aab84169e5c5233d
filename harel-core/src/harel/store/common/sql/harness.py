"""The conformance harness of a file-backed SQL-family backend (SQLite, libSQL), written once.

A harness hands the kit stores over one database file: every ``open_sync()`` /
``open_async()`` returns a new store object (a new connection) over that same file, which is
how restart and two-writer tests run; ``url()`` names the file for a fresh interpreter and
``destroy()`` closes what the harness opened and removes the file with its WAL, shared-memory
and journal companions.  A backend subclass says which stores to open, its URL prefix and how
to validate its options (:class:`FileKind`), and provides what reads the file directly
(``footprint``, ``raw_commit``).
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self
from urllib.parse import quote, urlencode

from harel.conformance.harness import StoreHarness
from harel.store.contract import AsyncExecutionStore, ExecutionStore

COMPANIONS = ("", "-wal", "-shm", "-journal")
"""The suffixes of a database file and its companions."""

DEFAULT_BUSY_TIMEOUT_MS = 5000


@dataclass(frozen=True)
class FileKind:
    """What a :class:`FileHarness` opens: ``name`` in :meth:`~FileHarness.describe`
    (``"sqlite"``), ``url_prefix`` before the file's absolute path (``"sqlite:///"``), the sync
    store (``store_class(path, **knobs)``), the async one (``await async_class.open(path,
    **knobs)``) and ``make_options(path, **knobs)``, the backend's validated options."""

    name: str
    url_prefix: str
    store_class: Any
    async_class: Any
    make_options: Callable[..., Any]


class FileHarness(StoreHarness):
    """One database file as the kit's dataset (created empty on the first open)."""

    kind: ClassVar[FileKind]
    """The backend's stores, URL prefix and options."""

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        synchronous: str = "FULL",
    ) -> None:
        self.path = Path(path)
        if str(path) == ":memory:":
            raise ValueError("a harness needs a database file (':memory:' cannot be reopened)")
        self.options = self.kind.make_options(  # validate now, not at the first open
            str(self.path), busy_timeout_ms=busy_timeout_ms, synchronous=synchronous
        )
        self._sync: weakref.WeakSet[Any] = weakref.WeakSet()
        self._async: weakref.WeakSet[Any] = weakref.WeakSet()

    @classmethod
    def in_workdir(cls, workdir: Path, knobs: dict[str, Any]) -> Self:
        """A harness over a NEW file under ``workdir`` with the URL ``knobs`` it understands
        (isolation means a fresh, empty file: the URL's own file is never touched)."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        return cls(
            workdir / f"harel-kit-{uuid.uuid4().hex}.db",
            busy_timeout_ms=knobs.get("busy_timeout_ms", DEFAULT_BUSY_TIMEOUT_MS),
            synchronous=knobs.get("synchronous", "FULL"),
        )

    def knobs(self) -> dict[str, Any]:
        """The knobs every store of this harness opens with."""
        return {
            "busy_timeout_ms": self.options.busy_timeout_ms,
            "synchronous": self.options.synchronous,
        }

    def open_sync(self) -> ExecutionStore:
        """A new sync store (its own connection) over the harness file."""
        store = self.kind.store_class(str(self.path), **self.knobs())
        self._sync.add(store)
        return store  # type: ignore[no-any-return]

    async def open_async(self) -> AsyncExecutionStore:
        """A new async store (its own connection and thread) over the harness file."""
        store = await self.kind.async_class.open(str(self.path), **self.knobs())
        self._async.add(store)
        return store  # type: ignore[no-any-return]

    def url(self) -> str:
        """``<prefix>/absolute/path.db?busy_timeout_ms=...&synchronous=...``."""
        return f"{self.kind.url_prefix}{quote(str(self.path.resolve()))}?{urlencode(self.knobs())}"

    def destroy(self) -> None:
        """Close every store still open through this harness and delete the database files."""
        for store in list(self._sync):
            store.close()
        for astore in list(self._async):
            astore.close_blocking()
        for suffix in COMPANIONS:
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def describe(self) -> str:
        """``<backend> <file>``."""
        return f"{self.kind.name} {self.path}"
