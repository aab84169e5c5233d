"""The conformance harness of a file-backed SQL-family backend (SQLite, libSQL), written once.

A harness hands the kit stores over one database file: every ``open_sync()`` /
``open_async()`` returns a new store object (a new connection) over that same file, which is
how restart and two-writer tests run; ``url()`` names the file for a fresh interpreter and
``destroy()`` closes what the harness opened and removes the file with its WAL, shared-memory
and journal companions.  A backend subclass says which stores to open (:attr:`store_class`,
:attr:`async_class`), its URL scheme, how to validate its options, and provides what reads the
file directly (``footprint``, ``raw_commit``).
"""

from __future__ import annotations

import uuid
import weakref
from pathlib import Path
from typing import Any, ClassVar, Self
from urllib.parse import quote, urlencode

from harel.conformance.harness import StoreHarness
from harel.store.contract import AsyncExecutionStore, ExecutionStore

COMPANIONS = ("", "-wal", "-shm", "-journal")
"""The suffixes of a database file and its companions."""

DEFAULT_BUSY_TIMEOUT_MS = 5000


class FileHarness(StoreHarness):
    """One database file as the kit's dataset (created empty on the first open)."""

    name: ClassVar[str]
    """The backend's name in :meth:`describe` (``"sqlite"``)."""
    url_prefix: ClassVar[str]
    """What precedes the file's absolute path in :meth:`url` (``"sqlite:///"``)."""
    store_class: ClassVar[Any]
    """The sync store, called as ``store_class(path, **knobs)``."""
    async_class: ClassVar[Any]
    """The async store, opened with ``await async_class.open(path, **knobs)``."""

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
        self.options = self.make_options(  # validate now, not at the first open
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

    def make_options(self, path: str, **knobs: Any) -> Any:
        """The backend's validated options for ``path`` (raises on bad knobs)."""
        raise NotImplementedError

    def knobs(self) -> dict[str, Any]:
        """The knobs every store of this harness opens with."""
        return {
            "busy_timeout_ms": self.options.busy_timeout_ms,
            "synchronous": self.options.synchronous,
        }

    def open_sync(self) -> ExecutionStore:
        """A new sync store (its own connection) over the harness file."""
        store = self.store_class(str(self.path), **self.knobs())
        self._sync.add(store)
        return store  # type: ignore[no-any-return]

    async def open_async(self) -> AsyncExecutionStore:
        """A new async store (its own connection and thread) over the harness file."""
        store = await self.async_class.open(str(self.path), **self.knobs())
        self._async.add(store)
        return store  # type: ignore[no-any-return]

    def url(self) -> str:
        """``<prefix>/absolute/path.db?busy_timeout_ms=...&synchronous=...``."""
        return f"{self.url_prefix}{quote(str(self.path.resolve()))}?{urlencode(self.knobs())}"

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
        return f"{self.name} {self.path}"
