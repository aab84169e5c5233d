"""Render trace steps as a readable timeline (``harel run``, ``harel trace``, the demo)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def format_step(step: dict[str, Any], *, since: float | None = None) -> str:
    """One line: index, optional ``+seconds`` since ``since``, event, ``from -> to``, actions."""
    parts = [f"{step.get('index', '?'):>3}"]
    stamp = step.get("timestamp")
    if since is not None and isinstance(stamp, int | float):
        parts.append(f"+{stamp - since:.0f}s".ljust(7))
    parts.append(f"{step.get('event_kind', '?'):<10}")
    parts.append(f"{step.get('from_path') or '-'} -> {step.get('to_path') or '-'}")
    line = "  ".join(parts)
    data = step.get("event_data")
    if data:
        line += "  " + json.dumps(data, sort_keys=True, default=str)
    actions = step.get("actions")
    if actions:
        line += "  [" + ", ".join(str(label) for label in actions) + "]"
    return line


def format_timeline(steps: Iterable[dict[str, Any]], *, since: float | None = None) -> list[str]:
    """Every step formatted by :func:`format_step`, in order."""
    return [format_step(step, since=since) for step in steps]
