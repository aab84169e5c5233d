"""The ``memory`` backend's entry point (``harel.stores``): its registration.

Imports neither the stores nor the engine: listing backends never loads them.
"""

from __future__ import annotations

from collections.abc import Callable

from harel.registry import StoreBackend, core_version, hookimpl
from harel.store.memory._capabilities import CAPABILITIES


def url_from_env(env: object) -> str:
    """``STM_STORE_BACKEND=memory`` without ``STM_STORE_URL``: a fresh ``memory://`` store."""
    return "memory://"


@hookimpl
def harel_register_stores(register: Callable[[StoreBackend], None]) -> None:
    """Register ``memory://`` (``memory://NAME`` shares NAME's data within the process)."""
    register(
        StoreBackend(
            name="memory",
            schemes=("memory",),
            store="harel.store.memory.sync:DictStore",
            async_store="harel.store.memory.aio:AsyncDictStore",
            capabilities=CAPABILITIES,
            distribution="harel-core",
            version=core_version(),
            harness="harel.store.memory.testing:harness_from_url",
            local_url="memory://",
            description="in-process dictionaries (tests, embedding); not durable",
            legacy_env="harel.store.memory._plugin:url_from_env",
            exists="harel.store.memory._options:store_exists",
        )
    )
