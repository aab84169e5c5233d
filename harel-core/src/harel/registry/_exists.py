"""Whether a store URL names existing storage, without creating any (``create=False``).

A backend answers through the ``exists`` hook its :class:`~harel.registry.StoreBackend`
registration declares (``"module:function"``, ``function(url, **knobs) -> bool``); each
first-party distribution keeps its rule there, next to its plugin.  Core's own stores have a
rule here (memory: the named dataset of this process).  ``None`` means the backend cannot
tell: the caller opens it as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harel.registry._descriptor import StoreBackend
from harel.registry._select import _load

CORE_DISTRIBUTION = "harel-core"


def _memory(url: str) -> bool:
    from harel.store.memory import _options

    name = _options.dataset_name(url)
    return bool(name) and name in _options._NAMED


RULES: dict[str, Callable[[str], bool]] = {"memory": _memory}
"""Existence rules of core's own stores (registered by harel-core without an ``exists`` hook)."""


def store_exists(backend: StoreBackend, url: str, **knobs: Any) -> bool | None:
    """Whether ``url`` names existing storage of ``backend`` (``None``: it cannot tell);
    ``knobs`` are those the store would be opened with (``connect_retries``, ...).

    Creates nothing.  Errors are the backend's typed ones (InvalidStoreURL, StoreUnavailable);
    a hook that cannot be imported raises BackendUnavailable.
    """
    if backend.exists is not None:
        hook = _load(backend, backend.exists, "existence check")
        if not callable(hook):
            from harel.store.errors import PluginError

            raise PluginError(
                f"store backend {backend.name!r}: exists={backend.exists!r} is not callable"
            )
        return bool(hook(url, **knobs))
    rule = RULES.get(backend.name)
    if rule is not None and backend.distribution == CORE_DISTRIBUTION:
        return rule(url)
    return None
