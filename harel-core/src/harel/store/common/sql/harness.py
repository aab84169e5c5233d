"""The conformance harness of a file-backed SQL-family backend (SQLite, libSQL), written once.

A harness hands the kit stores over one database file: every ``open_sync()`` /
``open_async()`` returns a new store object (a new connection) over that same file, which is
how restart and two-writer tests run; ``url()`` names the file for a fresh interpreter and
``destroy()`` closes what the harness opened and removes the file with its WAL, shared-memory
and journal companions.  A backend subclass says which stores to open, its URL prefix and how
to validate its options (:class:`FileKind`), and provides what reads the file directly
(``footprint``, ``raw_commit``).  The benchmarks' raw side commit is written here once
(:func:`raw_side_statements`, :meth:`FileHarness.raw_side_commit`): rqlite sends the same
statements as one batch.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Self
from urllib.parse import quote, urlencode

from harel.conformance.harness import RawSide, RawSideCommit, StoreHarness
from harel.store.common.sql.requests import Statement
from harel.store.contract import AsyncExecutionStore, ExecutionStore

COMPANIONS = ("", "-wal", "-shm", "-journal")
"""The suffixes of a database file and its companions."""

DEFAULT_BUSY_TIMEOUT_MS = 5000

RAW_UPDATE = "UPDATE executions SET data = ?, version = ? WHERE id = ? AND version = ?"
"""The benchmarks' raw CAS write of a document (SQLite dialect)."""
_RAW_SIDE = (
    "INSERT INTO outbox (target_id, event) VALUES (?, ?)",
    "INSERT INTO processed_events (execution_id, event_id, processed_at) VALUES (?, ?, ?)",
    "INSERT INTO timers (execution_id, path, fire_at, fire_at_repr) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (execution_id, path) DO UPDATE "
    "SET fire_at = excluded.fire_at, fire_at_repr = excluded.fire_at_repr",
    "INSERT INTO trace (execution_id, idx, entry) VALUES (?, ?, ?)",
)


def raw_side_statements(
    execution_id: str, version: int, document: str, side: RawSide
) -> tuple[Statement, ...]:
    """The raw equivalent of a commit with side writes, as plain SQLite-dialect statements
    to run in ONE transaction: :data:`RAW_UPDATE` (its rowcount is the CAS), then the outbox
    row, the dedupe mark, the timer upsert and the trace row of ``side``."""
    outbox, mark, timer, trace = _RAW_SIDE
    return (
        Statement(RAW_UPDATE, (document, version + 1, execution_id, version)),
        Statement(outbox, (execution_id, side.emit)),
        Statement(mark, (execution_id, side.event_id, side.now)),
        Statement(timer, (execution_id, side.timer_path, side.fire_at, repr(side.fire_at))),
        Statement(trace, (execution_id, side.trace_index, side.trace)),
    )


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

    def raw_side_commit(self) -> RawSideCommit:
        """The benchmarks' raw side commit: ``BEGIN IMMEDIATE``, the statements of
        :func:`raw_side_statements`, ``COMMIT`` (``ROLLBACK`` and ``RuntimeError`` when the CAS
        misses), each sent straight to the driver connection of a new store (so with the
        stores' PRAGMAs), with none of the store's Python around them."""
        store = self.kind.store_class(str(self.path), **self.knobs())
        self._sync.add(store)
        execute = partial(store._execute, store._conn)
        begin, commit, rollback = (Statement(s) for s in ("BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"))

        def write(execution_id: str, version: int, document: str, side: RawSide) -> None:
            cas, *rows = raw_side_statements(execution_id, version, document, side)
            execute(begin)
            if execute(cas).rowcount != 1:
                execute(rollback)
                raise RuntimeError(f"raw write: {execution_id!r} is not at version {version}")
            for statement in rows:
                execute(statement)
            execute(commit)

        return write

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
