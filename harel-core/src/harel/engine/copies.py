"""The runner's committed copies: the execution as this runner last stored it, kept so the
next event for it needs no read before its commit (one round trip per event).

A kept copy is only ever a starting point: the commit's version CAS and its fence (the
receipt of the version this very object stored, :attr:`PreparedCommit.base
<harel.store.author.PreparedCommit>`) refuse it when another writer stepped, or when the
execution was purged and re-created, and the runner then reloads.  A copy is *taken* out for
a step (so two concurrent deliveries never share one object) and put back only after a
successful commit; what the runner hands to its caller is always an independent copy
(:func:`independent_copy`), so a caller mutating a result never changes what the next
commit starts from.
"""

from __future__ import annotations

import copy
import threading
from enum import Enum
from typing import Any, TypeVar

from pydantic import BaseModel

from harel.model import Execution

DEFAULT_KEEP = 1024
"""Committed copies a runner keeps by default (least recently stored dropped first)."""

_IMMUTABLE = frozenset({str, int, float, bool, type(None), bytes})

M = TypeVar("M", bound=BaseModel)


def _clone(value: Any) -> Any:
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is dict:
        return {key: _clone(item) for key, item in value.items()}
    if kind is list:
        return [_clone(item) for item in value]
    if isinstance(value, BaseModel):
        return _clone_model(value)
    if isinstance(value, Enum):
        return value
    return copy.deepcopy(value)


def _clone_model(model: M) -> M:
    new = model.__copy__()  # a new __dict__, fields-set and extras; values still shared
    fields = new.__dict__
    for name, item in fields.items():
        if type(item) not in _IMMUTABLE:
            fields[name] = _clone(item)
    extra = new.__pydantic_extra__
    if extra:
        object.__setattr__(new, "__pydantic_extra__", _clone(extra))
    return new


def independent_copy(exe: Execution) -> Execution:
    """A deep copy of ``exe`` sharing no mutable value with it (equal to it, version included).

    Several times cheaper than ``model_copy(deep=True)`` for the JSON-shaped values an
    execution holds; anything else in it is deep-copied."""
    return _clone_model(exe)


class CommittedCopies:
    """A bounded, thread-safe map of execution id -> the object this runner last committed.

    ``keep`` (``0`` turns keeping off) bounds it; the least recently stored copy goes first.
    """

    def __init__(self, keep: int = DEFAULT_KEEP) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise ValueError(f"keep_copies must be an int >= 0, got {keep!r}")
        self.keep = keep
        self._copies: dict[str, Execution] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._copies)

    def take(self, execution_id: str) -> Execution | None:
        """Remove and return the kept copy of ``execution_id`` (``None`` when none is kept)."""
        with self._lock:
            return self._copies.pop(execution_id, None)

    def put(self, exe: Execution) -> None:
        """Keep ``exe`` (just committed by this runner) as the newest copy of its id."""
        if not self.keep:
            return
        with self._lock:
            copies = self._copies
            copies.pop(exe.id, None)
            copies[exe.id] = exe
            if len(copies) > self.keep:
                del copies[next(iter(copies))]

    def drop(self, execution_id: str) -> None:
        """Forget the copy of ``execution_id`` (it is known to be out of date)."""
        with self._lock:
            self._copies.pop(execution_id, None)

    def clear(self) -> None:
        """Forget every copy."""
        with self._lock:
            self._copies.clear()
