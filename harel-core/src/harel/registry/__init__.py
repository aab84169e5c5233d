"""The store plugin registry: discovery of backend distributions and store selection.

A backend distribution declares an entry point in the ``harel.stores`` group; its target (a
``_plugin`` module that imports no driver) has one hookimpl, ``harel_register_stores(register)``,
calling ``register(StoreBackend(...))``.  Discovery runs once, on first use (never at ``import
harel``), and isolates each plugin: one that fails to import, raises, registers garbage,
conflicts or was built for another harel-core is listed with its error and reported once as a
:class:`PluginWarning`.  The switches ``HAREL_LOAD_PLUGINS``, ``HAREL_DISABLE_PLUGINS``,
``HAREL_STRICT_PLUGINS`` and ``HAREL_PREFER_PLUGINS`` are described in harel-core's README.
"""

from harel.registry._compat import core_version
from harel.registry._core import (
    PluginWarning,
    available_backends,
    backend_for_url,
    get_backend,
    register,
    reset,
    unregister,
)
from harel.registry._descriptor import BackendInfo, StoreBackend, hookimpl
from harel.registry._env import StoreSettings, store_from_env, store_settings_from_env
from harel.registry._select import (
    check_backend,
    harness_for_url,
    harness_spec,
    open_async_store,
    open_store,
)

__all__ = [
    "BackendInfo",
    "PluginWarning",
    "StoreBackend",
    "StoreSettings",
    "available_backends",
    "backend_for_url",
    "check_backend",
    "core_version",
    "get_backend",
    "harness_for_url",
    "harness_spec",
    "hookimpl",
    "open_async_store",
    "open_store",
    "register",
    "reset",
    "store_from_env",
    "store_settings_from_env",
    "unregister",
]
