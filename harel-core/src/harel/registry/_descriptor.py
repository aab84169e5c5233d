"""The plugin-facing types: the pluggy markers, ``StoreBackend`` and its validation."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Literal

import pluggy

from harel.store.contract import Capabilities
from harel.store.errors import PluginError

PROJECT = "harel"
"""The pluggy project name of harel's hooks."""

ENTRY_POINT_GROUP = "harel.stores"
"""The entry-point group a backend distribution declares its plugin module in."""

hookimpl = pluggy.HookimplMarker(PROJECT)
"""Decorate a plugin's ``harel_register_stores`` function with this."""

hookspec = pluggy.HookspecMarker(PROJECT)

_NAME = re.compile(r"[a-z][a-z0-9_-]*\Z")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*\Z")
_IMPORT = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z")
_VARIABLE = re.compile(r"[A-Z_][A-Z0-9_]*\Z")

BackendStatus = Literal["ok", "broken", "incompatible", "disabled", "ignored", "not installed"]
"""A backend row's status in :func:`harel.registry.available_backends`."""


def _installed_version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except (metadata.PackageNotFoundError, ValueError):  # a source tree that is not installed
        return "0+unknown"


@dataclass(frozen=True)
class StoreBackend:
    """What a plugin registers: one backend, described without importing its driver.

    ``store``/``async_store``/``harness`` are import strings ``"module:attr"``; core imports
    them only when a store is opened (or ``harel stores --check`` runs).  ``local_url`` is a
    URL template with ``{workdir}`` for a throwaway store that needs no server (embedded
    backends); tests and ``harel.conformance.backend_test_url`` use it.

    ``legacy_env`` (an import string ``"module:function"``, or ``None``) names the function
    that builds the store URL from the backend's legacy environment variables when
    ``STM_STORE_URL`` is not set: ``function(env: Mapping[str, str]) -> str | None``, returning
    ``None`` when none of its variables is set and raising ``StoreConfigError`` (naming the
    variable) for a malformed one.  Knobs travel in the URL's query.  ``legacy_vars`` lists
    the variables it reads, for messages.  The function's module must import no driver.

    ``exists`` (an import string ``"module:function"``, or ``None``) names the function that
    tells whether the store a URL names exists, for ``open_store(url, create=False)`` (the
    CLI's read-only commands): ``function(url: str, **knobs) -> bool`` (``knobs``: those
    ``from_url`` would get, e.g. ``connect_retries``), one cheap read that creates nothing,
    raising InvalidStoreURL (malformed URL) or StoreUnavailable (server unreachable).
    It is imported only when asked, so its module may import the driver.  ``None``: the store
    cannot tell, and ``create=False`` opens it as usual.
    """

    name: str
    schemes: tuple[str, ...]
    store: str
    async_store: str
    capabilities: Capabilities
    distribution: str
    version: str = ""
    """The backend's release; empty (the default): the installed version of ``distribution``
    (``"0+unknown"`` when it is not installed, e.g. run from a source tree)."""
    harness: str | None = None
    description: str = ""
    local_url: str | None = None
    legacy_env: str | None = None
    legacy_vars: tuple[str, ...] = ()
    exists: str | None = None

    def __post_init__(self) -> None:
        if self.version == "" and isinstance(self.distribution, str):
            object.__setattr__(self, "version", _installed_version(self.distribution))

    @property
    def targets(self) -> tuple[str, str]:
        """The import strings that identify the implementation (duplicate detection)."""
        return (self.store, self.async_store)


class HookSpecs:
    """The hook specification every store plugin implements."""

    @hookspec
    def harel_register_stores(self, register: Callable[[StoreBackend], None]) -> None:
        """Call ``register(StoreBackend(...))`` once per backend this plugin provides."""


@dataclass(frozen=True)
class BackendInfo:
    """One row of :func:`harel.registry.available_backends`.

    ``status`` is ``"ok"`` (usable), ``"broken"`` (failed to load, registered garbage or
    conflicts with another plugin), ``"incompatible"`` (built for another harel-core),
    ``"disabled"`` (switched off by ``HAREL_LOAD_PLUGINS``/``HAREL_DISABLE_PLUGINS``, or
    overridden by ``HAREL_PREFER_PLUGINS``), ``"ignored"`` (a third-party plugin claiming a
    first-party backend's name or scheme, not preferred by ``HAREL_PREFER_PLUGINS``) or
    ``"not installed"`` (a first-party backend, listed on request); ``error`` says why.
    """

    name: str
    distribution: str
    version: str | None
    schemes: tuple[str, ...]
    capabilities: Capabilities | None
    status: BackendStatus
    error: str | None = None
    backend: StoreBackend | None = None
    entry_point: str | None = None

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready mapping (for ``harel stores --json``)."""
        backend = self.backend
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "schemes": list(self.schemes),
            "capabilities": None if self.capabilities is None else self.capabilities.as_dict(),
            "status": self.status,
            "error": self.error,
            "entry_point": self.entry_point,
            "store": None if backend is None else backend.store,
            "async_store": None if backend is None else backend.async_store,
            "harness": None if backend is None else backend.harness,
            "local_url": None if backend is None else backend.local_url,
            "description": "" if backend is None else backend.description,
            "legacy_vars": [] if backend is None else list(backend.legacy_vars),
            "exists": None if backend is None else backend.exists,
        }


def is_import_string(value: object) -> bool:
    """Whether ``value`` has the ``"package.module:attr"`` form."""
    return isinstance(value, str) and _IMPORT.match(value) is not None


def validate_backend(backend: object) -> StoreBackend:
    """``backend`` itself when it is a well-formed :class:`StoreBackend`, else PluginError."""
    if not isinstance(backend, StoreBackend):
        raise PluginError(
            f"register() expects a harel.registry.StoreBackend, got {type(backend).__name__}"
        )
    label = f"backend {backend.name!r}"
    if not isinstance(backend.name, str) or not _NAME.match(backend.name):
        raise PluginError(
            f"invalid backend name {backend.name!r}: use lowercase letters, digits, '_' or '-', "
            "starting with a letter"
        )
    schemes = backend.schemes
    if not isinstance(schemes, tuple) or not schemes:
        raise PluginError(f"{label}: schemes must be a non-empty tuple of URL schemes")
    for scheme in schemes:
        if not isinstance(scheme, str) or not _SCHEME.match(scheme):
            raise PluginError(
                f"{label}: invalid URL scheme {scheme!r} (lowercase, e.g. 'postgresql')"
            )
    if len(set(schemes)) != len(schemes):
        raise PluginError(f"{label}: scheme listed twice in {schemes!r}")
    for field_name in ("store", "async_store"):
        value = getattr(backend, field_name)
        if not is_import_string(value):
            raise PluginError(
                f"{label}: {field_name}={value!r} is not an import string 'package.module:Class'"
            )
    if backend.harness is not None and not is_import_string(backend.harness):
        raise PluginError(
            f"{label}: harness={backend.harness!r} is not an import string 'module:function'"
        )
    if backend.local_url is not None and (
        not isinstance(backend.local_url, str)
        or backend.local_url.split("://", 1)[0] not in schemes
    ):
        raise PluginError(
            f"{label}: local_url={backend.local_url!r} must be a URL template using one of "
            f"its schemes {schemes!r}, e.g. 'sqlite:///{{workdir}}/store.db'"
        )
    caps = backend.capabilities
    if not isinstance(caps, Capabilities):
        raise PluginError(
            f"{label}: capabilities must be a harel.store.contract.Capabilities, "
            f"got {type(caps).__name__}"
        )
    for flag, value in caps.as_dict().items():
        if not isinstance(value, bool):
            raise PluginError(f"{label}: capability {flag}={value!r} must be True or False")
    for field_name in ("distribution", "version"):
        value = getattr(backend, field_name)
        if not isinstance(value, str) or not value.strip():
            raise PluginError(f"{label}: {field_name} must be a non-empty string")
    if backend.legacy_env is not None and not is_import_string(backend.legacy_env):
        raise PluginError(
            f"{label}: legacy_env={backend.legacy_env!r} is not an import string "
            "'package.module:function'"
        )
    if not isinstance(backend.legacy_vars, tuple) or not all(
        isinstance(name, str) and _VARIABLE.match(name) for name in backend.legacy_vars
    ):
        raise PluginError(
            f"{label}: legacy_vars={backend.legacy_vars!r} must be a tuple of environment "
            "variable names such as ('STM_STORE_DB',)"
        )
    if backend.exists is not None and not is_import_string(backend.exists):
        raise PluginError(
            f"{label}: exists={backend.exists!r} is not an import string 'package.module:function'"
        )
    if backend.legacy_vars and backend.legacy_env is None:
        raise PluginError(f"{label}: legacy_vars needs legacy_env, the function that reads them")
    if not isinstance(backend.description, str):
        raise PluginError(f"{label}: description must be a string")
    return backend
