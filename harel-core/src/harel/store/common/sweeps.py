"""The relay/sweep ``limit`` rule shared by every store's ``pending_*`` and ``due_timers``."""

from __future__ import annotations


def sweep_limit(limit: int | None) -> int | None:
    """``limit`` itself when it is ``None`` (unbounded) or an int >= 1, else ``ValueError``."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be an int >= 1 or None, got {limit!r}")
    return limit
