"""The ``memory`` backend's entry point (``harel.stores``): registers DictStore/AsyncDictStore."""

from __future__ import annotations

from collections.abc import Callable

import harel
from harel.registry import StoreBackend, hookimpl
from harel.store.memory import CAPABILITIES


@hookimpl
def harel_register_stores(register: Callable[[StoreBackend], None]) -> None:
    """Register ``memory://`` (``memory://NAME`` shares NAME's data within the process)."""
    register(
        StoreBackend(
            name="memory",
            schemes=("memory",),
            store="harel.store.memory:DictStore",
            async_store="harel.store.memory:AsyncDictStore",
            capabilities=CAPABILITIES,
            distribution="harel-core",
            version=harel.__version__,
            harness="harel.store._memory_testing:harness_from_url",
            local_url="memory://",
            description="in-process dictionaries (tests, embedding); not durable",
        )
    )
