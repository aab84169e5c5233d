"""``memory://`` URLs: a fresh private dataset, or ``memory://NAME`` shared within the process."""

from __future__ import annotations

import threading
from typing import Any

from harel.store.common import parse_store_url
from harel.store.errors import InvalidStoreURL
from harel.store.memory._tables import MemoryData

SCHEME = "memory"

_NAMED: dict[str, MemoryData] = {}
_NAMED_LOCK = threading.Lock()


def dataset_name(url: str) -> str:
    """The dataset a memory URL names (``""``: a fresh private one); refuses any option."""
    parsed = parse_store_url(url)
    if parsed.scheme != SCHEME:
        raise InvalidStoreURL(f"{parsed.redacted!r} is not a memory:// URL")
    parsed.knobs(frozenset())
    return (parsed.host or "") + parsed.path.strip("/")


def data_for_url(url: str) -> MemoryData:
    """The dataset of ``url``: new for ``memory://``, this process's shared one for a NAME."""
    name = dataset_name(url)
    if not name:
        return MemoryData()
    with _NAMED_LOCK:
        return _NAMED.setdefault(name, MemoryData())


def store_exists(url: str, **knobs: Any) -> bool:
    """The ``exists`` hook: whether ``url`` names a dataset of this process (creates none)."""
    name = dataset_name(url)
    return bool(name) and name in _NAMED
