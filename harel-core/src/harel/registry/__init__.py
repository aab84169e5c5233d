"""The store plugin registry: discovery of backend distributions and store selection.

A backend distribution declares an entry point in the ``harel.stores`` group whose target
(a small ``_plugin`` module that imports no driver) carries one pluggy hookimpl::

    from harel.registry import StoreBackend, hookimpl

    @hookimpl
    def harel_register_stores(register):
        register(StoreBackend(name="sqlite", schemes=("sqlite",), ...))

Discovery runs on first use (never at ``import harel``), once, and isolates every plugin:
one that fails to import, raises, registers garbage, conflicts with another or was built
for another harel-core is recorded with its error (see :func:`available_backends`) and
reported once as a :class:`PluginWarning`.  Switches, read at discovery:
``HAREL_LOAD_PLUGINS=a,b`` (only these entry points; an item may also be a distribution
name or ``distribution:entry-point``), ``HAREL_DISABLE_PLUGINS=x,y`` or ``*``,
``HAREL_STRICT_PLUGINS=1`` (raise plugin errors instead of recording them),
``HAREL_PREFER_PLUGINS=dist`` (let that distribution's backends take a name or scheme of a
first-party backend, or win a conflict; otherwise a third-party plugin claiming a first-party
name or scheme is ignored and reported, and the first-party backend keeps it).

``__all__`` holds what users need; the other attributes (switch names, ``reset``, the
harness and check helpers, ``StoreSettings``) serve tools and tests.
"""

from __future__ import annotations

# ``name as name``: re-exported for tools and tests, not part of ``__all__``.
from harel.registry._compat import core_version as core_version
from harel.registry._core import (
    DISABLE_VAR as DISABLE_VAR,
)
from harel.registry._core import (
    LOAD_VAR as LOAD_VAR,
)
from harel.registry._core import (
    PREFER_VAR as PREFER_VAR,
)
from harel.registry._core import (
    REGISTRY as REGISTRY,
)
from harel.registry._core import (
    STRICT_VAR as STRICT_VAR,
)
from harel.registry._core import (
    PluginWarning,
)
from harel.registry._core import (
    Registry as Registry,
)
from harel.registry._descriptor import (
    ENTRY_POINT_GROUP as ENTRY_POINT_GROUP,
)
from harel.registry._descriptor import (
    BackendInfo,
    StoreBackend,
    hookimpl,
)
from harel.registry._descriptor import (
    BackendStatus as BackendStatus,
)
from harel.registry._descriptor import (
    HookSpecs as HookSpecs,
)
from harel.registry._descriptor import (
    hookspec as hookspec,
)
from harel.registry._descriptor import (
    validate_backend as validate_backend,
)
from harel.registry._env import (
    BACKEND_VAR as BACKEND_VAR,
)
from harel.registry._env import (
    URL_VAR as URL_VAR,
)
from harel.registry._env import (
    StoreSettings as StoreSettings,
)
from harel.registry._env import (
    legacy_url as legacy_url,
)
from harel.registry._env import (
    store_from_env,
)
from harel.registry._env import (
    store_settings_from_env as store_settings_from_env,
)
from harel.registry._firstparty import FIRST_PARTY as FIRST_PARTY
from harel.registry._firstparty import FirstParty as FirstParty
from harel.registry._select import (
    check_backend as check_backend,
)
from harel.registry._select import (
    harness_for_url as harness_for_url,
)
from harel.registry._select import (
    harness_spec as harness_spec,
)
from harel.registry._select import (
    import_object as import_object,
)
from harel.registry._select import (
    open_async_store,
    open_store,
)
from harel.registry._select import (
    resolve_public_name as resolve_public_name,
)
from harel.registry._select import (
    store_class as store_class,
)

__all__ = [
    "BackendInfo",
    "PluginWarning",
    "StoreBackend",
    "available_backends",
    "backend_for_url",
    "get_backend",
    "hookimpl",
    "open_async_store",
    "open_store",
    "register",
    "store_from_env",
    "unregister",
]


def available_backends(*, include_not_installed: bool = False) -> list[BackendInfo]:
    """Every known backend with its status (``ok``/``broken``/``incompatible``/``disabled``;
    with ``include_not_installed`` also the absent first-party ones).  Imports no driver."""
    return REGISTRY.available(include_not_installed=include_not_installed)


def get_backend(name: str) -> StoreBackend:
    """The usable backend ``name``.

    Raises BackendNotInstalled (a first-party backend; the message has the pip line),
    BackendUnavailable (installed but broken/incompatible/disabled/conflicting) or
    UnknownBackend (naming the installed backends).
    """
    return REGISTRY.get(name)


def backend_for_url(url: str) -> StoreBackend:
    """The usable backend for ``url``'s scheme (InvalidStoreURL / UnknownScheme otherwise)."""
    return REGISTRY.for_url(url)


def register(plugin: object) -> list[StoreBackend]:
    """Register a plugin object/module (with a ``harel_register_stores`` hookimpl) or a
    :class:`StoreBackend` in this process; returns the backends added (PluginError on
    garbage or conflict; an identical twin is a no-op)."""
    return REGISTRY.register(plugin)


def unregister(name: str) -> None:
    """Forget backend ``name`` (UnknownBackend when it is not registered)."""
    REGISTRY.unregister(name)


def reset() -> None:
    """Forget every backend (run-time ones too); the next use discovers again (for tests)."""
    REGISTRY.reset()
