"""Template filters: JSON, times and relative times, ids in URLs.

Each filter returns plain text; the templates' autoescape escapes it.  None of them marks
anything safe.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

JSON_CHARS = 100_000
"""Longest pretty-printed context shown whole; longer ones are cut (with a note)."""

SHORT_CHARS = 160
"""Longest value shown in a diff or a table cell."""


def pretty_json(value: Any, limit: int = JSON_CHARS) -> str:
    """``value`` as indented JSON (keys sorted), cut at ``limit`` characters."""
    text = json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)
    if len(text) > limit:
        return text[:limit] + f"\n… ({len(text) - limit:,} more characters)"
    return text


def short_json(value: Any, limit: int = SHORT_CHARS) -> str:
    """``value`` as one line of JSON, cut at ``limit`` characters."""
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def when(stamp: float | None) -> str:
    """An epoch time as ``2026-12-07 23:14:43 UTC`` (``-`` when unknown)."""
    if stamp is None:
        return "-"
    try:
        return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"{stamp!r} (out of range)"


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def relative(stamp: float | None, now: float | None = None) -> str:
    """``in 3 min`` / ``5 s ago`` / ``now`` relative to ``now`` (default: this moment)."""
    if stamp is None:
        return "-"
    delta = stamp - (time.time() if now is None else now)
    if abs(delta) < 1:
        return "now"
    return f"in {_span(delta)}" if delta > 0 else f"{_span(-delta)} ago"


def path_id(execution_id: str) -> str:
    """An execution id as one URL path segment (every reserved character escaped)."""
    return quote(execution_id, safe="")


FILTERS = {
    "pretty_json": pretty_json,
    "short_json": short_json,
    "when": when,
    "relative": relative,
    "path_id": path_id,
}
"""The filters every monitor template can use."""
