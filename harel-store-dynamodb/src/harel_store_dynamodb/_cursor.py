"""The trace cursor of an execution (``tn``: next step index, ``tl``: lowest kept index) and the
per-store hint cache that lets a traced commit skip the read of it.

The cursor lives on the execution item.  A traced commit writes step ``tn`` and sets ``tn + 1``
under the condition that ``version``, ``tn`` and ``tl`` are still what it assumed, so a stale
hint never writes a wrong index: the condition fails, DynamoDB returns the current item
(``ALL_OLD``) and the commit retries with the truth.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from harel.store.author import trace_keep_from

from harel_store_dynamodb._values import Item, as_int

CACHE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class TraceCursor:
    """``version`` of the execution item it was read at, next index ``tn``, lowest kept ``tl``."""

    version: int
    next_index: int
    low: int

    def after_step(self, trace_max: int | None) -> TraceCursor:
        """The cursor once step ``next_index`` is written under the ring size ``trace_max``."""
        keep_from = trace_keep_from(self.next_index, trace_max)
        low = self.low if keep_from is None else max(self.low, keep_from)
        return TraceCursor(self.version, self.next_index + 1, low)

    def at_version(self, version: int) -> TraceCursor:
        """The same cursor on another version of the execution."""
        return TraceCursor(version, self.next_index, self.low)


NEW_EXECUTION = TraceCursor(0, 0, 0)


def cursor_of(item: Item, what: str) -> TraceCursor:
    """The cursor stored on an execution item."""
    return TraceCursor(as_int(item, "v", what), as_int(item, "tn", what), as_int(item, "tl", what))


class CursorCache:
    """Recently seen cursors by execution id (a hint, bounded, thread-safe)."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._cursors: OrderedDict[str, TraceCursor] = OrderedDict()

    def get(self, execution_id: str) -> TraceCursor | None:
        """The last cursor seen for ``execution_id``."""
        with self._lock:
            return self._cursors.get(execution_id)

    def put(self, execution_id: str, cursor: TraceCursor) -> None:
        """Remember ``cursor`` (evicting the least recently stored beyond the bound)."""
        with self._lock:
            self._cursors[execution_id] = cursor
            self._cursors.move_to_end(execution_id)
            while len(self._cursors) > self._size:
                self._cursors.popitem(last=False)

    def drop(self, execution_id: str) -> None:
        """Forget ``execution_id``."""
        with self._lock:
            self._cursors.pop(execution_id, None)
