"""The plugin-facing types: the pluggy markers, ``StoreBackend`` (and its validation) and
``BackendInfo``."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Literal

import pluggy

from harel.store.contract import Capabilities
from harel.store.errors import PluginError

PROJECT = "harel"
ENTRY_POINT_GROUP = "harel.stores"
hookimpl = pluggy.HookimplMarker(PROJECT)
"""Decorate a plugin's ``harel_register_stores`` function with this."""
hookspec = pluggy.HookspecMarker(PROJECT)

BackendStatus = Literal["ok", "broken", "incompatible", "disabled", "ignored", "not installed"]


@dataclass(frozen=True)
class StoreBackend:
    """What a plugin registers: one backend, described without importing its driver.

    ``store``/``async_store``, ``harness`` (``harness_from_url(url, workdir)``), ``legacy_env``
    (``function(env) -> url | None``, reading the variables ``legacy_vars`` names; its module
    imports no driver) and ``exists`` (``function(url, **knobs) -> bool``, creating nothing)
    are import strings ``"module:attr"``, imported only when used.  ``local_url`` is a
    ``{workdir}`` template for a throwaway store that needs no server.  An empty ``version``
    becomes the installed version of ``distribution`` (``"0+unknown"`` when not installed).
    """

    name: str
    schemes: tuple[str, ...]
    store: str
    async_store: str
    capabilities: Capabilities
    distribution: str
    version: str = ""
    harness: str | None = None
    description: str = ""
    local_url: str | None = None
    legacy_env: str | None = None
    legacy_vars: tuple[str, ...] = ()
    exists: str | None = None

    def __post_init__(self) -> None:
        if self.version == "" and isinstance(self.distribution, str):
            try:
                version = metadata.version(self.distribution)
            except (metadata.PackageNotFoundError, ValueError):  # a source tree, not installed
                version = "0+unknown"
            object.__setattr__(self, "version", version)

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
    """One row of :func:`harel.registry.available_backends`; ``error`` says why a row is not
    ``ok``: ``broken`` (failed to load, registered garbage, conflicts), ``incompatible``
    (built for another harel-core), ``disabled`` (``HAREL_LOAD_PLUGINS`` /
    ``HAREL_DISABLE_PLUGINS``, or overridden by ``HAREL_PREFER_PLUGINS``), ``ignored`` (a
    third-party claim on a first-party name or scheme) or ``not installed`` (first-party)."""

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
        backend, caps = self.backend, self.capabilities
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "schemes": list(self.schemes),
            "capabilities": None if caps is None else caps.as_dict(),
            "status": self.status,
            "error": self.error,
            "entry_point": self.entry_point,
            **{
                key: getattr(backend, key, None)
                for key in ("store", "async_store", "harness", "local_url")
            },
            "description": getattr(backend, "description", ""),
            "legacy_vars": list(getattr(backend, "legacy_vars", ())),
            "exists": getattr(backend, "exists", None),
        }


def _matches(pattern: str) -> Callable[[Any, StoreBackend], bool]:
    """A rule: the value is a string matching ``pattern`` whole."""
    compiled = re.compile(pattern)
    return lambda value, _: isinstance(value, str) and compiled.fullmatch(value) is not None


_is_import = _matches(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_is_scheme = _matches(r"[a-z][a-z0-9+.-]*")
_is_variable = _matches(r"[A-Z_][A-Z0-9_]*")


def _optional_import(value: object, backend: StoreBackend) -> bool:
    return value is None or _is_import(value, backend)


def _filled(value: object, _: StoreBackend) -> bool:
    return isinstance(value, str) and bool(value.strip())


_IMPORT = "is not an import string 'package.module:{}'"
_RULES: tuple[tuple[str, Callable[[Any, StoreBackend], bool], str], ...] = (
    (
        "name",
        _matches(r"[a-z][a-z0-9_-]*"),
        "is an invalid backend name: use lowercase letters, digits, '_' or '-', "
        "starting with a letter",
    ),
    (
        "schemes",
        lambda v, _: isinstance(v, tuple) and bool(v),
        "must be a non-empty tuple of URL schemes",
    ),
    (
        "schemes",
        lambda v, b: all(_is_scheme(s, b) for s in v),
        "holds an invalid URL scheme (lowercase, e.g. 'postgresql')",
    ),
    ("schemes", lambda v, _: len(set(v)) == len(v), "has a scheme listed twice"),
    ("store", _is_import, _IMPORT.format("Class")),
    ("async_store", _is_import, _IMPORT.format("Class")),
    ("harness", _optional_import, _IMPORT.format("function")),
    (
        "local_url",
        lambda v, b: v is None or (isinstance(v, str) and v.split("://")[0] in b.schemes),
        "must be a URL template using one of its schemes, e.g. 'sqlite:///{workdir}/store.db'",
    ),
    (
        "capabilities",
        lambda v, _: (
            isinstance(v, Capabilities) and all(isinstance(f, bool) for f in v.as_dict().values())
        ),
        "must be a harel.store.contract.Capabilities with True/False flags",
    ),
    ("distribution", _filled, "must be a non-empty string"),
    ("version", _filled, "must be a non-empty string"),
    ("legacy_env", _optional_import, _IMPORT.format("function")),
    (
        "legacy_vars",
        lambda v, b: isinstance(v, tuple) and all(_is_variable(name, b) for name in v),
        "must be a tuple of environment variable names such as ('STM_STORE_DB',)",
    ),
    ("exists", _optional_import, _IMPORT.format("function")),
    (
        "legacy_env",
        lambda v, b: v is not None or not b.legacy_vars,
        "but legacy_vars needs legacy_env, the function that reads them",
    ),
    ("description", lambda v, _: isinstance(v, str), "must be a string"),
)


def validate_backend(backend: object) -> StoreBackend:
    """``backend`` itself when it is a well-formed :class:`StoreBackend`, else PluginError
    naming the field and what it must be."""
    if not isinstance(backend, StoreBackend):
        raise PluginError(
            f"register() expects a harel.registry.StoreBackend, got {type(backend).__name__}"
        )
    for field_name, valid, requirement in _RULES:
        value = getattr(backend, field_name)
        if not valid(value, backend):
            raise PluginError(f"backend {backend.name!r}: {field_name}={value!r} {requirement}")
    return backend
