"""The relay/sweep ``limit`` rule shared by every store's ``pending_*`` and ``due_timers``."""

from __future__ import annotations

from harel.store.common.validate import check_limit


def sweep_limit(limit: int | None) -> int | None:
    """``limit`` itself when it is ``None`` (unbounded) or an int in ``[1, MAX_INT]``.

    ``TypeError`` for a non-int (``bool`` included), ``InvalidArgument`` (a ``ValueError``)
    when out of range.
    """
    return check_limit(limit)
