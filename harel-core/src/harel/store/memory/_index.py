"""Sorted indexes for the memory tables: what keeps sweeps and listing from scanning.

:class:`SortedKeys` is a sorted list of unique keys (binary search to find, ``list.insert`` /
``del`` to change: a memmove, never a Python-level scan); reads start at the front or after a
bound and stop as soon as they have what they need.  :class:`Owned` maps each execution id to
the keys of one table that belong to it.  Neither locks: the tables call them under their lock.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar

K = TypeVar("K")
H = TypeVar("H", bound=Hashable)


class SortedKeys(Generic[K]):
    """Unique keys kept in ascending order."""

    __slots__ = ("keys",)

    def __init__(self) -> None:
        self.keys: list[K] = []

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, key: K) -> None:
        """Insert ``key`` (already present: nothing)."""
        keys: list[Any] = self.keys
        at = bisect_left(keys, key)
        if at == len(keys) or keys[at] != key:
            keys.insert(at, key)

    def discard(self, key: K) -> None:
        """Remove ``key`` (absent: nothing)."""
        keys: list[Any] = self.keys
        at = bisect_left(keys, key)
        if at < len(keys) and keys[at] == key:
            del keys[at]

    def while_true(self, keep: Callable[[K], bool], limit: int | None) -> list[K]:
        """The smallest keys, ascending, up to the first one ``keep`` refuses (at most
        ``limit``): reads only what it returns, plus one."""
        taken: list[K] = []
        for key in self.keys:
            if (limit is not None and len(taken) >= limit) or not keep(key):
                break
            taken.append(key)
        return taken

    def after(self, bound: K | None) -> Iterator[K]:
        """The keys greater than ``bound`` (every key for ``None``), ascending; the index must
        not change while the iterator is in use."""
        keys: list[Any] = self.keys
        start = 0 if bound is None else bisect_right(keys, bound)
        return (keys[at] for at in range(start, len(keys)))


class Owned(Generic[H]):
    """Which keys of one table belong to each execution id."""

    __slots__ = ("by_id",)

    def __init__(self) -> None:
        self.by_id: dict[str | None, set[H]] = {}

    def add(self, owner: str | None, key: H) -> None:
        """Record that ``key`` belongs to ``owner``."""
        self.by_id.setdefault(owner, set()).add(key)

    def discard(self, owner: str | None, key: H) -> None:
        """Forget that ``key`` belongs to ``owner`` (an owner left with nothing is dropped)."""
        keys = self.by_id.get(owner)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.by_id[owner]

    def pop(self, owner: str | None) -> set[H]:
        """Every key of ``owner``, forgotten."""
        return self.by_id.pop(owner, set())

    def of(self, owner: str | None) -> set[H]:
        """Every key of ``owner`` (a copy)."""
        return set(self.by_id.get(owner, ()))
