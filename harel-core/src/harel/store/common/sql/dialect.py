"""What differs between the members of the SQL family, as data, and the statement renderer.

SQLite, libSQL and rqlite run the same SQLite engine, so they share tables, indexes and
statement texts.  What differs is how a statement reaches it:

* ``paramstyle``: ``"qmark"`` (``?``, a value repeated where a statement uses it twice) or
  ``"numeric"`` (``?1``, ``?2``: a value bound once and referenced by number);
* ``begin``: the statement opening an interactive write transaction (``BEGIN IMMEDIATE`` takes
  the write lock before the first read, so lock waits happen before any work), or ``None`` for
  a driver whose transaction is one request holding every statement (rqlite's
  ``/db/execute?transaction``): side writes then carry a guard instead of a decision between
  statements (see :mod:`harel.store.common.sql.statements`);
* ``upsert``: ``"on_conflict"`` (``INSERT ... ON CONFLICT ... DO UPDATE/NOTHING``, SQLite 3.24+)
  or ``"or_replace"`` (``INSERT OR REPLACE/IGNORE`` for older engines; a work-row touch is then
  an ``UPDATE`` and an ``INSERT OR IGNORE``).  ``claim`` needs window functions (SQLite 3.25+)
  whatever the dialect;
* ``batch_reads`` (single-request dialects): a :class:`Batch` may hold ``SELECT`` statements whose
  rows come back in its results (rqlite's unified ``/db/request`` endpoint), so a lost CAS's
  found version and purge's status check travel in the operation's own request.

Statement texts are written once with named slots (``:id``); :func:`render` turns a text into
the dialect's placeholders plus the order in which :meth:`Rendered.bind` takes the values.
Values always travel as bound parameters; nothing is ever formatted into a statement.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from operator import itemgetter
from typing import Any, Literal

from harel.store.common.sql.requests import Statement

Paramstyle = Literal["qmark", "numeric"]
Upsert = Literal["on_conflict", "or_replace"]

_SLOT = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@dataclass(frozen=True, slots=True)
class Dialect:
    """One member of the SQL family: its name (for messages) and how statements reach it."""

    name: str
    paramstyle: Paramstyle = "qmark"
    begin: str | None = "BEGIN IMMEDIATE"
    commit: str = "COMMIT"
    rollback: str = "ROLLBACK"
    upsert: Upsert = "on_conflict"
    batch_reads: bool = False

    @property
    def single_request(self) -> bool:
        """True when a write transaction is one request (no ``BEGIN``; guarded side writes)."""
        return self.begin is None


SQLITE = Dialect("SQLite")
"""SQLite through a DB-API driver (stdlib ``sqlite3``; libSQL's driver speaks the same)."""

RQLITE = Dialect("rqlite", paramstyle="qmark", begin=None, batch_reads=True)
"""rqlite's HTTP API: every write transaction is one request (``/db/request?transaction``, reads
included; ``replace(RQLITE, batch_reads=False)`` for servers with ``/db/execute`` only)."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """A statement text in one dialect's placeholders and the slot name of each parameter."""

    sql: str
    slots: tuple[str, ...]
    _take: Callable[[Mapping[str, Any]], tuple[Any, ...]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        # an itemgetter picks the parameters in C: binding is on every commit's path
        take: Callable[[Mapping[str, Any]], tuple[Any, ...]]
        if not self.slots:
            take = _no_params
        elif len(self.slots) == 1:
            one = itemgetter(self.slots[0])
            take = lambda values: (one(values),)  # noqa: E731 - a one-line closure
        else:
            take = itemgetter(*self.slots)
        object.__setattr__(self, "_take", take)

    def bind(self, **values: Any) -> Statement:
        """The statement with ``values`` bound in placeholder order (a missing slot raises)."""
        return Statement(self.sql, self._take(values))

    def bind_map(self, values: Mapping[str, Any]) -> Statement:
        """:meth:`bind` from a mapping (no keyword-argument copy: the hot paths use it)."""
        return Statement(self.sql, self._take(values))


def _no_params(_values: Mapping[str, Any]) -> tuple[Any, ...]:
    return ()


@lru_cache(maxsize=512)
def render(text: str, dialect: Dialect) -> Rendered:
    """Turn ``:name`` slots of ``text`` into ``dialect``'s placeholders.

    ``text`` is one of our fixed statement texts (never user data); it holds no string literal
    with a colon, so every ``:name`` is a slot.
    """
    if dialect.paramstyle == "qmark":
        slots: list[str] = []

        def qmark(match: re.Match[str]) -> str:
            slots.append(match.group(1))
            return "?"

        return Rendered(_SLOT.sub(qmark, text), tuple(slots))
    numbers: dict[str, int] = {}

    def numeric(match: re.Match[str]) -> str:
        number = numbers.setdefault(match.group(1), len(numbers) + 1)
        return f"?{number}"

    sql = _SLOT.sub(numeric, text)
    return Rendered(sql, tuple(numbers))
