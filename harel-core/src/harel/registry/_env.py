"""``store_from_env()``: the store named by ``STM_STORE_BACKEND``/``STM_STORE_URL``.

Core knows no backend's variables.  When ``STM_STORE_URL`` is not set, the selected backend
(``STM_STORE_BACKEND``, default ``sqlite`` as upstream) builds its URL from its own legacy
variables through the function its plugin names in ``StoreBackend.legacy_env``.  Settings
are read at call time, never at import time.  Trace settings are applied by the caller.
"""

from __future__ import annotations

import os
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

from harel.registry._core import REGISTRY
from harel.registry._descriptor import StoreBackend
from harel.registry._firstparty import FIRST_PARTY
from harel.registry._select import import_object, open_async_store, open_store
from harel.store.common.urls import parse_store_url, redact_text, redact_url
from harel.store.contract import AsyncExecutionStore, ExecutionStore
from harel.store.errors import (
    BackendError,
    BackendUnavailable,
    StoreConfigError,
    StoreError,
    UnknownBackend,
)

BACKEND_VAR = "STM_STORE_BACKEND"
URL_VAR = "STM_STORE_URL"
DEFAULT_BACKEND = "sqlite"
EXAMPLE_URL = "sqlite:///app.db"


class NoStoreConfigured(StoreConfigError):
    """Neither ``STM_STORE_URL`` nor ``STM_STORE_BACKEND`` nor a default backend's legacy
    variable is set (the CLI then asks for ``--store URL``)."""


@dataclass(frozen=True)
class StoreSettings:
    """Which store the environment selects: backend name and URL.

    ``source`` names the variable(s) the URL came from.  The repr hides passwords.
    """

    backend: str
    url: str
    source: str = URL_VAR

    def __repr__(self) -> str:
        return (
            f"StoreSettings(backend={self.backend!r}, url={redact_url(self.url)!r}, "
            f"source={self.source!r})"
        )


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    if value is None or not value.strip():
        return None
    return value.strip()


def _known_names() -> list[str]:
    return sorted(set(REGISTRY.backends()) | set(FIRST_PARTY))


def _schemes_of(name: str) -> tuple[str, ...] | None:
    try:
        return REGISTRY.get(name).schemes
    except BackendError:
        known = FIRST_PARTY.get(name)
        return None if known is None else known.schemes


def legacy_url(backend: StoreBackend, env: Mapping[str, str]) -> str | None:
    """The URL ``backend``'s plugin builds from its legacy variables (``None``: none is set).

    Raises StoreConfigError for a malformed variable (from the plugin's function) and
    BackendUnavailable when the function cannot be imported or fails unexpectedly.
    """
    if backend.legacy_env is None:
        return None
    try:
        function = import_object(backend.legacy_env)
    except Exception as exc:
        raise BackendUnavailable(
            f"store backend {backend.name!r} ({backend.distribution}) cannot import its "
            f"legacy_env function {backend.legacy_env!r}: {redact_text(str(exc))}; reinstall "
            f"{backend.distribution}"
        ) from None
    try:
        url = function(env)
    except StoreError:
        raise
    except Exception as exc:
        raise BackendUnavailable(
            f"store backend {backend.name!r}: its legacy_env function failed "
            f"({redact_text(str(exc)) or type(exc).__name__}); set {URL_VAR} instead"
        ) from None
    if url is not None and not isinstance(url, str):
        raise BackendUnavailable(
            f"store backend {backend.name!r}: legacy_env returned {type(url).__name__}, "
            "not a URL string"
        )
    return url


def _legacy_text(backend: StoreBackend) -> str:
    names = backend.legacy_vars
    return f"legacy variable{'s' if len(names) > 1 else ''} {' / '.join(names)}"


def _nothing_configured(backend: StoreBackend | None) -> NoStoreConfigured:
    legacy = ""
    if backend is not None and backend.legacy_vars:
        legacy = f" (or the {backend.name} backend's {_legacy_text(backend)})"
    return NoStoreConfigured(
        f"no store is configured: set {URL_VAR} to a store URL, e.g. {URL_VAR}={EXAMPLE_URL}"
        f"{legacy}; `harel stores` lists the installed backends"
    )


def store_settings_from_env(environ: Mapping[str, str] | None = None) -> StoreSettings:
    """Read ``STM_STORE_BACKEND``/``STM_STORE_URL`` (and the backend's legacy variables).

    Raises StoreConfigError naming what to set (nothing configured, a missing variable, a
    backend/URL mismatch), UnknownBackend naming an unknown backend and the known ones,
    BackendNotInstalled (with the pip line) for a first-party backend that is not installed,
    InvalidStoreURL for a malformed URL.  No store is opened.
    """
    env = os.environ if environ is None else environ
    raw_name = _get(env, BACKEND_VAR)
    name = raw_name.lower() if raw_name is not None else None
    if name is not None and _schemes_of(name) is None:
        raise UnknownBackend(
            f"unknown store backend {raw_name!r} in {BACKEND_VAR}; known backends: "
            f"{', '.join(_known_names())}"
        )
    url = _get(env, URL_VAR)
    if url is not None:
        parsed = parse_store_url(url)
        if name is None:
            return StoreSettings(REGISTRY.for_url(url).name, url, URL_VAR)
        schemes = _schemes_of(name) or ()
        if parsed.scheme not in schemes:
            raise StoreConfigError(
                f"{BACKEND_VAR}={name} does not match {URL_VAR}={parsed.redacted}: the {name} "
                f"backend handles {', '.join(s + '://' for s in schemes)} URLs; make them agree "
                f"or unset {BACKEND_VAR}"
            )
        return StoreSettings(name, url, URL_VAR)
    if name is None:
        try:
            default: StoreBackend | None = REGISTRY.get(DEFAULT_BACKEND)
        except BackendError:
            default = None
        found = None if default is None else legacy_url(default, env)
        if default is None or found is None:
            raise _nothing_configured(default)
        return _settings(default, found, env)
    backend = REGISTRY.get(name)  # BackendNotInstalled / BackendUnavailable say what to do
    found = legacy_url(backend, env)
    if found is None:
        legacy = ""
        if backend.legacy_vars:
            legacy = f" (or its {_legacy_text(backend)})"
        example = backend.schemes[0] + "://..."
        raise StoreConfigError(
            f"{BACKEND_VAR}={name} but {URL_VAR} is not set: set {URL_VAR} to a {example} URL"
            f"{legacy}"
        )
    return _settings(backend, found, env)


def _settings(backend: StoreBackend, url: str, env: Mapping[str, str]) -> StoreSettings:
    parsed = parse_store_url(url)
    used = [name for name in backend.legacy_vars if _get(env, name) is not None]
    source = ", ".join(used) or f"{backend.name} defaults"
    if parsed.scheme not in backend.schemes:
        raise BackendUnavailable(
            f"store backend {backend.name!r}: its legacy variables ({source}) built a "
            f"{parsed.scheme}:// URL, which it does not handle; set {URL_VAR} instead"
        )
    return StoreSettings(backend.name, url, source)


@overload
def store_from_env(
    *, async_: Literal[False] = False, environ: Mapping[str, str] | None = None
) -> ExecutionStore: ...


@overload
def store_from_env(
    *, async_: Literal[True], environ: Mapping[str, str] | None = None
) -> Coroutine[Any, Any, AsyncExecutionStore]: ...


def store_from_env(
    *, async_: bool = False, environ: Mapping[str, str] | None = None
) -> ExecutionStore | Coroutine[Any, Any, AsyncExecutionStore]:
    """Open the store the environment selects (see :func:`store_settings_from_env`).

    Sync by default; with ``async_=True`` it returns a coroutine to await for the async
    store: ``store = await store_from_env(async_=True)``.
    """
    settings = store_settings_from_env(environ)
    if async_:
        return open_async_store(settings.url)
    return open_store(settings.url)
