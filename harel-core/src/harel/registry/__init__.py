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
``HAREL_STRICT_PLUGINS=1`` (raise plugin errors instead of recording them).
"""

from __future__ import annotations

from harel.registry._compat import core_version
from harel.registry._core import (
    DISABLE_VAR,
    LOAD_VAR,
    REGISTRY,
    STRICT_VAR,
    PluginWarning,
    Registry,
)
from harel.registry._descriptor import (
    ENTRY_POINT_GROUP,
    BackendInfo,
    HookSpecs,
    Status,
    StoreBackend,
    hookimpl,
    hookspec,
    validate_backend,
)
from harel.registry._env import (
    BACKEND_VAR,
    URL_VAR,
    StoreSettings,
    libpq_dsn_to_url,
    store_from_env,
    store_settings_from_env,
)
from harel.registry._firstparty import FIRST_PARTY, FirstParty
from harel.registry._select import (
    check_backend,
    harness_for_url,
    harness_spec,
    import_object,
    open_async_store,
    open_store,
    resolve_public_name,
    store_class,
)
from harel.store.errors import (
    BackendError,
    BackendNotInstalled,
    BackendUnavailable,
    HarnessUnavailable,
    PluginError,
    UnknownBackend,
    UnknownScheme,
)

__all__ = [
    "BACKEND_VAR",
    "DISABLE_VAR",
    "ENTRY_POINT_GROUP",
    "FIRST_PARTY",
    "LOAD_VAR",
    "REGISTRY",
    "STRICT_VAR",
    "URL_VAR",
    "BackendError",
    "BackendInfo",
    "BackendNotInstalled",
    "BackendUnavailable",
    "FirstParty",
    "HarnessUnavailable",
    "HookSpecs",
    "PluginError",
    "PluginWarning",
    "Registry",
    "Status",
    "StoreBackend",
    "StoreSettings",
    "UnknownBackend",
    "UnknownScheme",
    "available_backends",
    "backend_for_url",
    "check_backend",
    "core_version",
    "get_backend",
    "harness_for_url",
    "harness_spec",
    "hookimpl",
    "hookspec",
    "import_object",
    "libpq_dsn_to_url",
    "open_async_store",
    "open_store",
    "register",
    "reset",
    "resolve_public_name",
    "store_class",
    "store_from_env",
    "store_settings_from_env",
    "unregister",
    "validate_backend",
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
