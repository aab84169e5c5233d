"""The ``memory`` backend as core's registry and URL parsing see it; imports no store module.

``memory://`` is a fresh private dataset; ``memory://NAME`` is NAME's dataset, shared by every
store of this process that names it.  Knob: ``trace_max`` (query or keyword, keywords win).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from harel.store.common.urls import StoreURL
from harel.store.contract import Capabilities
from harel.store.memory._tables import MemoryData
from harel.store.spec import BackendSpec, trace_max_knob

_NAMED: dict[str, MemoryData] = {}
_NAMED_LOCK = threading.Lock()


def _name(parsed: StoreURL) -> str:
    return (parsed.host or "") + parsed.path.strip("/")


def _location(parsed: StoreURL) -> dict[str, Any]:
    """The dataset: new for ``memory://``, this process's shared one for a NAME."""
    name = _name(parsed)
    if not name:
        return {"data": MemoryData()}
    with _NAMED_LOCK:
        return {"data": _NAMED.setdefault(name, MemoryData())}


def url_from_env(env: Mapping[str, str]) -> str:
    """``STM_STORE_BACKEND=memory`` without ``STM_STORE_URL``: a fresh ``memory://`` store."""
    del env
    return "memory://"


SPEC = BackendSpec(
    name="memory",
    title="memory",
    schemes=("memory",),
    url_forms=("memory://", "memory://NAME"),
    store="harel.store.memory.sync:DictStore",
    async_store="harel.store.memory.aio:AsyncDictStore",
    capabilities=Capabilities(
        persistent=False, multi_process=False, ordered_listing=True, exact_pages=True
    ),
    distribution="harel-core",
    location=_location,
    knobs=(trace_max_knob(),),
    legacy_env="harel.store.memory._spec:url_from_env",
    harness="harel.store.memory.testing:harness_from_url",
    local_url="memory://",
    exists="harel.store.memory._spec:store_exists",
    description="in-process dictionaries (tests, embedding); not durable",
)
"""The backend's declaration; the ``harel.stores`` entry point names it."""
CAPABILITIES = SPEC.capabilities
"""In-process only; listing is ordered by id with exact pages."""


def dataset_name(url: str) -> str:
    """The dataset a memory URL names (``""``: a fresh private one); checks its knobs."""
    parsed, _knobs, _retry = SPEC.parse_url(url)
    return _name(parsed)


def store_exists(url: str, **knobs: Any) -> bool:
    """The ``exists`` hook: whether ``url`` names a dataset of this process (creates none)."""
    SPEC.knob_values(knobs)
    name = dataset_name(url)
    return bool(name) and name in _NAMED
