"""``jsondir://`` URLs and the store's options.

``jsondir:///abs/dir`` (absolute) or ``jsondir://relative/dir`` (relative to the working
directory).  Options (query string, or keyword arguments which win): ``trace_max`` (int,
0 = unbounded), ``fsync`` (bool, default true: flush every file to disk before it replaces the
old one) and ``lock_timeout`` (seconds to wait for the directory lock before raising
``StoreUnavailable``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import quote, unquote, urlencode

from harel.store.author import parse_store_url
from harel.store.common.urls import knob_bool, knob_float, knob_int
from harel.store.contract import DEFAULT_TRACE_MAX
from harel.store.errors import InvalidStoreURL

SCHEME = "jsondir"
DEFAULT_LOCK_TIMEOUT = 60.0
KNOBS = frozenset({"trace_max", "fsync", "lock_timeout"})
"""Options accepted in a URL's query or as keyword arguments of ``from_url``."""


class StoreOptions(TypedDict, total=False):
    """The stores' keyword options (each defaults as in :class:`JsonDirOptions`)."""

    trace_max: int | None
    fsync: bool
    lock_timeout: float


@dataclass(frozen=True)
class JsonDirOptions:
    """Everything a jsondir store is built from."""

    directory: Path
    trace_max: int | None = DEFAULT_TRACE_MAX
    fsync: bool = True
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT

    def as_kwargs(self) -> dict[str, Any]:
        """The options as the stores' constructor keywords."""
        return {
            "directory": self.directory,
            "trace_max": self.trace_max,
            "fsync": self.fsync,
            "lock_timeout": self.lock_timeout,
        }

    def url(self) -> str:
        """A ``jsondir://`` URL that opens the same directory with the same options."""
        query = {
            "trace_max": self.trace_max or 0,
            "fsync": "true" if self.fsync else "false",
            "lock_timeout": self.lock_timeout,
        }
        path = quote(str(self.directory.absolute()), safe="/")
        return f"{SCHEME}://{path}?{urlencode(query)}"


def directory_of(url: str) -> Path:
    """The directory a ``jsondir://`` URL names (relative paths are kept relative)."""
    parsed = parse_store_url(url)
    if parsed.scheme != SCHEME:
        raise InvalidStoreURL(
            f"{parsed.redacted!r} is not a jsondir URL: use jsondir:///abs/dir or "
            "jsondir://relative/dir"
        )
    rest = url.split("://", 1)[1].split("?", 1)[0].split("#", 1)[0]
    path = unquote(rest)
    if not path.strip("/"):
        raise InvalidStoreURL(f"{parsed.redacted!r} names no directory: use jsondir:///abs/dir")
    return Path(path)


def parse_url(url: str, **overrides: Any) -> JsonDirOptions:
    """Options from ``url`` and keyword ``overrides`` (unknown options are refused, named)."""
    directory = directory_of(url)
    knobs = parse_store_url(url).knobs(KNOBS)
    unknown = sorted(set(overrides) - KNOBS)
    if unknown:
        raise TypeError(
            f"unknown jsondir option(s) {', '.join(unknown)}; allowed: {', '.join(sorted(KNOBS))}"
        )
    options = JsonDirOptions(
        directory=directory,
        trace_max=knob_int(knobs, "trace_max", DEFAULT_TRACE_MAX),
        fsync=knob_bool(knobs, "fsync", True),
        lock_timeout=knob_float(knobs, "lock_timeout", DEFAULT_LOCK_TIMEOUT),
    )
    return JsonDirOptions(**(options.as_kwargs() | overrides))
