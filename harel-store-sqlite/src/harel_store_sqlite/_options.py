"""One SQLite store's validated settings: :class:`SqliteOptions`, built by :func:`make_options`
from a file and the knobs :data:`~harel_store_sqlite._spec.SPEC` declares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harel_store_sqlite._spec import SPEC

MEMORY = ":memory:"


@dataclass(frozen=True, slots=True)
class SqliteOptions:
    """Validated settings of one store (build it with :func:`make_options`)."""

    path: str
    trace_max: int | None
    busy_timeout_ms: int
    synchronous: str

    @property
    def in_memory(self) -> bool:
        """A private in-memory database (no WAL, nothing persists)."""
        return self.path == MEMORY or self.path.startswith("file::memory:")

    @property
    def where(self) -> str:
        """The database as named in messages."""
        return f"SQLite database {self.path!r}"


def make_options(path: str, **knobs: Any) -> SqliteOptions:
    """The settings of the file ``path`` with ``knobs`` (each checked against :data:`SPEC`)."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"path must be a non-empty str (a file or ':memory:'), got {path!r}")
    return SqliteOptions(path, **SPEC.knob_values(knobs))
