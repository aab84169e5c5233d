"""Store options: constructor knobs, their validation, and ``sqlite://`` URL parsing.

URL forms (the path after the third slash is the file):

* ``sqlite:///relative.db`` — relative to the working directory at open time;
* ``sqlite:////abs/path.db`` — absolute (percent-encode unusual characters);
* ``sqlite:///:memory:`` (also ``sqlite://:memory:``) — a private in-memory database.

Knobs ride as query parameters (``?busy_timeout_ms=2000&synchronous=NORMAL``) or keyword
arguments (which win over the URL's); ``connect_retries`` / ``retry_delay`` (``from_url``
only, query or keywords, validated by harel-core's ``retry_arguments``) retry an open that
finds the file locked.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, TypedDict

from harel.store.common import parse_store_url, retry_arguments
from harel.store.common.retry import RETRY_KNOBS, retry_knobs
from harel.store.common.urls import knob_choice, knob_int
from harel.store.contract import DEFAULT_TRACE_MAX
from harel.store.errors import InvalidStoreURL

MEMORY = ":memory:"
SCHEME = "sqlite"
SYNCHRONOUS_CHOICES = ("FULL", "NORMAL", "EXTRA")
"""``OFF`` is deliberately not offered: it can lose committed steps on an OS crash."""
DEFAULT_BUSY_TIMEOUT_MS = 5000
DEFAULT_CONNECT_RETRIES = 0
DEFAULT_RETRY_DELAY = 0.5
KNOBS = frozenset({"busy_timeout_ms", "synchronous", "trace_max"})
"""Options accepted in a URL's query or as keyword arguments of ``from_url``."""
CONNECT_KNOBS = RETRY_KNOBS
"""Options of ``from_url`` (URL query or keywords) that shape the open itself (retry on a
locked file)."""
_retry_arguments = partial(
    retry_arguments, default_retries=DEFAULT_CONNECT_RETRIES, default_delay=DEFAULT_RETRY_DELAY
)
"""``retry_arguments`` with this backend's defaults (``connect_retries=0``, ``retry_delay=0.5``)."""


class SqliteKnobs(TypedDict, total=False):
    """The keyword knobs of ``SqliteStore`` / ``AsyncSqliteStore.open``.

    * ``trace_max`` — trace steps kept per execution (0 or ``None``: no limit; default 200);
    * ``busy_timeout_ms`` — how long a write waits for another connection's write lock before
      raising ``StoreUnavailable`` (default 5000);
    * ``synchronous`` — ``FULL`` (default: a returned commit survives power loss), ``NORMAL``
      (with WAL: survives a process crash; the last commits may be lost on power loss or an
      OS crash; fewer fsyncs) or ``EXTRA``.

    Documents (the execution, each event, spawn context and trace step) are limited to the
    shared ``harel.store.common.limits.MAX_DOCUMENT_BYTES`` (16 MiB), well under SQLite's own
    ``SQLITE_LIMIT_LENGTH`` (1 GB), so the shared limit is the one that applies.
    """

    trace_max: int | None
    busy_timeout_ms: int
    synchronous: str


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

    @property
    def where(self) -> str:
        """The database as named in messages."""
        return f"SQLite database {self.path!r}"


def make_options(path: str, **knobs: Any) -> SqliteOptions:
    """Validate constructor arguments (``ValueError``/``TypeError`` name the bad one)."""
    unknown = sorted(set(knobs) - KNOBS)
    if unknown:
        raise TypeError(f"unknown SQLite store option(s): {', '.join(unknown)}")
    if not isinstance(path, str) or not path:
        raise ValueError(f"path must be a non-empty str (a file or ':memory:'), got {path!r}")
    trace_max = knobs.get("trace_max", DEFAULT_TRACE_MAX)
    if trace_max is not None and (
        isinstance(trace_max, bool) or not isinstance(trace_max, int) or trace_max < 0
    ):
        raise ValueError(f"trace_max must be an int >= 0 or None, got {trace_max!r}")
    busy_timeout_ms = _int("busy_timeout_ms", knobs.get("busy_timeout_ms", DEFAULT_BUSY_TIMEOUT_MS))
    synchronous = knobs.get("synchronous", "FULL")
    if not isinstance(synchronous, str) or synchronous.upper() not in SYNCHRONOUS_CHOICES:
        raise ValueError(
            f"synchronous must be one of {', '.join(SYNCHRONOUS_CHOICES)}, got {synchronous!r}"
        )
    return SqliteOptions(path, trace_max, busy_timeout_ms, synchronous.upper())


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def parse_sqlite_url(url: str) -> tuple[str, dict[str, Any]]:
    """The database path and the URL's store knobs (typed) of a ``sqlite://`` URL (its
    ``connect_retries`` / ``retry_delay`` are checked but left out: they only shape
    ``from_url``).

    Raises :class:`InvalidStoreURL` for another scheme, a host part, a missing path, an
    unknown knob or a malformed knob value.
    """
    path, knobs, _connect = _parse_url(url)
    return path, knobs


def _parse_url(url: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(path, store knobs, connect knobs)`` of a ``sqlite://`` URL, all typed."""
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
    query = parsed.knobs(KNOBS | CONNECT_KNOBS)
    knobs: dict[str, Any] = {}
    if "busy_timeout_ms" in query:
        knobs["busy_timeout_ms"] = knob_int(
            query, "busy_timeout_ms", DEFAULT_BUSY_TIMEOUT_MS, minimum=0
        )
    if "synchronous" in query:
        knobs["synchronous"] = knob_choice(query, "synchronous", "FULL", SYNCHRONOUS_CHOICES)
    if "trace_max" in query:
        knobs["trace_max"] = knob_int(query, "trace_max", DEFAULT_TRACE_MAX, minimum=0)
    return path, knobs, retry_knobs(query)


def from_url_args(url: str, knobs: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(path, store knobs, retry arguments)`` for ``from_url``.

    Keyword knobs win over the URL's; unknown keyword knobs raise :class:`InvalidStoreURL`
    naming them; the retry arguments are those of ``connect_with_retry``, from harel-core's
    ``retry_arguments`` (a bad ``connect_retries`` / ``retry_delay`` raises ``ValueError``
    naming it).
    """
    path, url_knobs, url_connect = _parse_url(url)
    unknown = sorted(set(knobs) - KNOBS - CONNECT_KNOBS)
    if unknown:
        raise InvalidStoreURL(
            f"unknown option(s) {', '.join(unknown)} for a sqlite store; "
            f"allowed: {', '.join(sorted(KNOBS | CONNECT_KNOBS))}"
        )
    store_knobs = {**url_knobs, **{k: v for k, v in knobs.items() if k in KNOBS}}
    connect = {**url_connect, **{k: v for k, v in knobs.items() if k in CONNECT_KNOBS}}
    return path, store_knobs, _retry_arguments(connect, what=f"SQLite database {path}")
