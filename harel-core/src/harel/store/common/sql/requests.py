"""The requests a SQL-family plan yields and the results its driver sends back.

A plan yields a :class:`Statement` (the driver runs it and sends a :class:`Result`) or, for
single-request dialects, a :class:`Batch` (the driver runs every statement in one transaction
and sends a list of :class:`Result`, one per statement).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Params = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Statement:
    """One SQL statement and its bound parameters (in placeholder order)."""

    sql: str
    params: Params = ()


@dataclass(frozen=True, slots=True)
class Batch:
    """Statements the driver must run in ONE transaction, in order (all applied or none)."""

    statements: tuple[Statement, ...]


@dataclass(frozen=True, slots=True)
class Result:
    """What a statement returned: its rows (empty for writes) and the rows it changed."""

    rows: Sequence[Sequence[Any]] = field(default_factory=tuple)
    rowcount: int = -1

    @property
    def first(self) -> Sequence[Any] | None:
        """The first row, or ``None``."""
        return self.rows[0] if self.rows else None
