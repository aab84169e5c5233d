"""The requests a SQL-family plan yields and the results its driver sends back.

A plan yields a :class:`Statement` (the driver runs it and sends a :class:`Result`) or, for
single-request dialects, a :class:`Batch` (the driver runs every statement in one transaction
and sends a list of :class:`Result`, one per statement; a single-request driver reports each
insert's rowid in :attr:`Result.last_id`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

Params = tuple[Any, ...]


class Statement(NamedTuple):
    """One SQL statement and its bound parameters (in placeholder order).

    Immutable; a named tuple because one is built for every statement a plan yields."""

    sql: str
    params: Params = ()


@dataclass(frozen=True, slots=True)
class Batch:
    """Statements the driver must run in ONE transaction, in order (all applied or none)."""

    statements: tuple[Statement, ...]


class Result(NamedTuple):
    """What a statement returned: its rows (empty for writes) and the rows it changed.

    Immutable; a named tuple because one is built for every statement a driver runs."""

    rows: Sequence[Sequence[Any]] = ()
    rowcount: int = -1
    last_id: int | None = None
    """The rowid of the row an ``INSERT`` wrote, when the driver reports it (rqlite's
    ``last_insert_id``; ``None`` otherwise: a DB-API driver returns ``RETURNING`` rows instead)."""

    @property
    def first(self) -> Sequence[Any] | None:
        """The first row, or ``None``."""
        return self.rows[0] if self.rows else None


_WROTE = (Result((), 0), Result((), 1))
"""The results of a write that changed no row or one row (most writes: shared, not rebuilt)."""


def write_result(rowcount: int) -> Result:
    """The :class:`Result` of a statement that returned no rows and changed ``rowcount`` rows
    (a driver's every write: the common ones shared, not built again)."""
    return _WROTE[rowcount] if 0 <= rowcount <= 1 else Result((), rowcount)
