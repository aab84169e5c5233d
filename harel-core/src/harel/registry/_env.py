"""``store_from_env()``: the store named by ``STM_STORE_BACKEND``/``STM_STORE_URL``.

Core knows no backend's variables: without ``STM_STORE_URL``, the selected backend (default
``sqlite``, as upstream) builds the URL from its own legacy variables through its
``StoreBackend.legacy_env`` function.  Settings are read at call time, never at import.
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


class NoStoreConfigured(StoreConfigError):
    """Nothing selects a store: no ``STM_STORE_URL``, ``STM_STORE_BACKEND`` or legacy
    variable of the default backend (the CLI then asks for ``--store URL``)."""


@dataclass(frozen=True)
class StoreSettings:
    """Which store the environment selects; ``source`` names the variable(s) the URL came
    from.  The repr hides passwords."""

    backend: str
    url: str
    source: str = URL_VAR

    def __repr__(self) -> str:
        return (
            f"StoreSettings(backend={self.backend!r}, url={redact_url(self.url)!r}, "
            f"source={self.source!r})"
        )


def _get(env: Mapping[str, str], name: str) -> str | None:
    return (env.get(name) or "").strip() or None


def _schemes_of(name: str) -> tuple[str, ...] | None:
    try:
        return REGISTRY.get(name).schemes
    except BackendError:
        known = FIRST_PARTY.get(name)
        return None if known is None else known.schemes


def legacy_url(backend: StoreBackend, env: Mapping[str, str]) -> str | None:
    """The URL ``backend``'s plugin builds from its legacy variables (``None``: none is set).

    StoreConfigError for a malformed variable (from the plugin's function); BackendUnavailable
    when the function cannot be imported, fails unexpectedly or returns no string.
    """
    if backend.legacy_env is None:
        return None
    label = f"store backend {backend.name!r}"
    try:
        function = import_object(backend.legacy_env)
    except Exception as exc:
        raise BackendUnavailable(
            f"{label} ({backend.distribution}) cannot import its legacy_env function "
            f"{backend.legacy_env!r}: {redact_text(str(exc))}; reinstall {backend.distribution}"
        ) from None
    try:
        url = function(env)
    except StoreError:
        raise
    except Exception as exc:
        raise BackendUnavailable(
            f"{label}: its legacy_env function failed "
            f"({redact_text(str(exc)) or type(exc).__name__}); set {URL_VAR} instead"
        ) from None
    if url is not None and not isinstance(url, str):
        raise BackendUnavailable(f"{label}: legacy_env returned {type(url).__name__}, not a URL")
    return url


def _legacy_text(backend: StoreBackend) -> str:
    names = backend.legacy_vars
    return f"legacy variable{'s' if len(names) > 1 else ''} {' / '.join(names)}"


def _from_legacy(backend: StoreBackend, env: Mapping[str, str]) -> StoreSettings | None:
    """The settings ``backend``'s legacy variables give, or ``None`` when none is set."""
    url = legacy_url(backend, env)
    if url is None:
        return None
    scheme = parse_store_url(url).scheme
    source = ", ".join(n for n in backend.legacy_vars if _get(env, n)) or f"{backend.name} defaults"
    if scheme not in backend.schemes:
        raise BackendUnavailable(
            f"store backend {backend.name!r}: its legacy variables ({source}) built a "
            f"{scheme}:// URL, which it does not handle; set {URL_VAR} instead"
        )
    return StoreSettings(backend.name, url, source)


def store_settings_from_env(environ: Mapping[str, str] | None = None) -> StoreSettings:
    """Read ``STM_STORE_BACKEND``/``STM_STORE_URL`` (and the backend's legacy variables); no
    store is opened.

    StoreConfigError naming what to set (nothing configured, a missing variable, a
    backend/URL mismatch), UnknownBackend naming the known backends, BackendNotInstalled
    (with the pip line), InvalidStoreURL for a malformed URL.
    """
    env = os.environ if environ is None else environ
    raw_name = _get(env, BACKEND_VAR)
    name = None if raw_name is None else raw_name.lower()
    if name is not None and _schemes_of(name) is None:
        known = ", ".join(sorted({*REGISTRY.backends(), *FIRST_PARTY}))
        raise UnknownBackend(
            f"unknown store backend {raw_name!r} in {BACKEND_VAR}; known backends: {known}"
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
        found = None if default is None else _from_legacy(default, env)
        if found is None:
            legacy = ""
            if default is not None and default.legacy_vars:
                legacy = f" (or the {default.name} backend's {_legacy_text(default)})"
            raise NoStoreConfigured(
                f"no store is configured: set {URL_VAR} to a store URL, e.g. "
                f"{URL_VAR}=sqlite:///app.db{legacy}; `harel stores` lists the installed backends"
            )
        return found
    backend = REGISTRY.get(name)  # BackendNotInstalled / BackendUnavailable say what to do
    found = _from_legacy(backend, env)
    if found is None:
        legacy = f" (or its {_legacy_text(backend)})" if backend.legacy_vars else ""
        raise StoreConfigError(
            f"{BACKEND_VAR}={name} but {URL_VAR} is not set: set {URL_VAR} to a "
            f"{backend.schemes[0]}://... URL{legacy}"
        )
    return found


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
    """Open the store the environment selects (see :func:`store_settings_from_env`); with
    ``async_=True`` a coroutine to await for the async store."""
    url = store_settings_from_env(environ).url
    return open_async_store(url) if async_ else open_store(url)
