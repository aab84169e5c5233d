"""Store options: constructor knobs, their validation, and ``sqlite://`` URL parsing.

URL forms (the path after the third slash is the file):

* ``sqlite:///relative.db`` — relative to the working directory at open time;
* ``sqlite:////abs/path.db`` — absolute;
* ``sqlite:///:memory:`` (also ``sqlite://:memory:``) — a private in-memory database.

Knobs ride as query parameters (``?busy_timeout_ms=2000&synchronous=NORMAL``) or keyword
arguments (which win over the URL's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harel.store.common import parse_store_url
from harel.store.common.urls import knob_choice, knob_int
from harel.store.contract import DEFAULT_TRACE_MAX
from harel.store.errors import InvalidStoreURL

MEMORY = ":memory:"
SCHEME = "sqlite"
SYNCHRONOUS_CHOICES = ("FULL", "NORMAL", "EXTRA")
"""``OFF`` is deliberately not offered: it can lose committed steps on an OS crash."""
DEFAULT_BUSY_TIMEOUT_MS = 5000
KNOBS = frozenset({"busy_timeout_ms", "synchronous", "trace_max"})
"""Options accepted in a URL's query or as keyword arguments of ``from_url``."""
CONNECT_KNOBS = frozenset({"connect_retries", "retry_delay"})
"""Keyword arguments of ``from_url`` that shape the open itself (retry on a locked file)."""


@dataclass(frozen=True, slots=True)
class SqliteOptions:
    """Validated settings of one store."""

    path: str
    trace_max: int | None = DEFAULT_TRACE_MAX
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
    synchronous: str = "FULL"

    @property
    def in_memory(self) -> bool:
        """A private in-memory database (no WAL, nothing persists)."""
        return self.path == MEMORY or self.path.startswith("file::memory:")

    def pragmas(self) -> list[str]:
        """The PRAGMA statements run at open (values validated, so they are safe to inline)."""
        statements = [f"PRAGMA busy_timeout = {self.busy_timeout_ms:d}"]
        if not self.in_memory:
            statements.append("PRAGMA journal_mode = WAL")
        statements.append(f"PRAGMA synchronous = {self.synchronous}")
        return statements


def make_options(
    path: str,
    *,
    trace_max: int | None,
    busy_timeout_ms: int,
    synchronous: str,
) -> SqliteOptions:
    """Validate constructor arguments (``ValueError``/``TypeError`` name the bad one)."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"path must be a non-empty str (a file or ':memory:'), got {path!r}")
    if trace_max is not None and (
        isinstance(trace_max, bool) or not isinstance(trace_max, int) or trace_max < 0
    ):
        raise ValueError(f"trace_max must be an int >= 0 or None, got {trace_max!r}")
    if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int):
        raise TypeError(f"busy_timeout_ms must be an int, got {busy_timeout_ms!r}")
    if busy_timeout_ms < 0:
        raise ValueError(f"busy_timeout_ms must be >= 0, got {busy_timeout_ms}")
    if not isinstance(synchronous, str) or synchronous.upper() not in SYNCHRONOUS_CHOICES:
        raise ValueError(
            f"synchronous must be one of {', '.join(SYNCHRONOUS_CHOICES)}, got {synchronous!r}"
        )
    return SqliteOptions(path, trace_max, busy_timeout_ms, synchronous.upper())


def parse_sqlite_url(url: str) -> tuple[str, dict[str, Any]]:
    """The database path and the URL's knobs (typed) of a ``sqlite://`` URL.

    Raises :class:`InvalidStoreURL` for another scheme, a host part, a missing path, an
    unknown knob or a malformed knob value.
    """
    if isinstance(url, str) and url.split("?", 1)[0].lower() == "sqlite://:memory:":
        url = "sqlite:///:memory:" + url[len("sqlite://:memory:") :]
    parsed = parse_store_url(url)
    if parsed.scheme != SCHEME:
        raise InvalidStoreURL(
            f"{parsed.redacted!r} is not a sqlite:// URL; use sqlite:///relative.db, "
            "sqlite:////absolute/path.db or sqlite:///:memory:"
        )
    if parsed.host or parsed.port or parsed.username:
        raise InvalidStoreURL(
            f"{parsed.redacted!r} names a host, but SQLite URLs have none: write three slashes "
            "before the path (sqlite:///relative.db, sqlite:////absolute/path.db)"
        )
    path = parsed.path[1:] if parsed.path.startswith("/") else parsed.path
    if not path:
        raise InvalidStoreURL(
            f"{parsed.redacted!r} names no database file; use sqlite:///relative.db, "
            "sqlite:////absolute/path.db or sqlite:///:memory:"
        )
    query = parsed.knobs(KNOBS)
    knobs: dict[str, Any] = {}
    if "busy_timeout_ms" in query:
        knobs["busy_timeout_ms"] = knob_int(
            query, "busy_timeout_ms", DEFAULT_BUSY_TIMEOUT_MS, minimum=0
        )
    if "synchronous" in query:
        knobs["synchronous"] = knob_choice(query, "synchronous", "FULL", SYNCHRONOUS_CHOICES)
    if "trace_max" in query:
        knobs["trace_max"] = knob_int(query, "trace_max", DEFAULT_TRACE_MAX, minimum=0)
    return path, knobs


def split_from_url_knobs(
    url: str, knobs: dict[str, Any]
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(path, store knobs, connect knobs)`` for ``from_url``: keyword knobs win over the URL's;
    unknown keyword knobs raise :class:`InvalidStoreURL` naming them."""
    path, url_knobs = parse_sqlite_url(url)
    unknown = sorted(set(knobs) - KNOBS - CONNECT_KNOBS)
    if unknown:
        raise InvalidStoreURL(
            f"unknown option(s) {', '.join(unknown)} for a sqlite store; "
            f"allowed: {', '.join(sorted(KNOBS | CONNECT_KNOBS))}"
        )
    store_knobs = {**url_knobs, **{k: v for k, v in knobs.items() if k in KNOBS}}
    connect = {k: v for k, v in knobs.items() if k in CONNECT_KNOBS}
    return path, store_knobs, connect
