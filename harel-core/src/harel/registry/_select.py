"""Turning a backend descriptor into classes, stores and harnesses (imports happen here)."""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harel.registry._core import REGISTRY
from harel.registry._descriptor import StoreBackend
from harel.registry._firstparty import first_party_for_class
from harel.store.contract import AsyncExecutionStore, ExecutionStore
from harel.store.errors import (
    BackendNotInstalled,
    BackendUnavailable,
    HarnessUnavailable,
    PluginError,
)

if TYPE_CHECKING:
    from harel.conformance.harness import StoreHarness

_STORE_CLASS_NAME = re.compile(r"[A-Z]\w*Store\Z")


def import_object(spec: str) -> Any:
    """Import ``"package.module:attr.path"`` and return the attribute (ImportError if absent)."""
    module_name, _, attr_path = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportError(f"module {module_name!r} has no attribute {attr_path!r}") from None
    return obj


def _load(backend: StoreBackend, spec: str, what: str) -> Any:
    try:
        return import_object(spec)
    except Exception as exc:
        raise BackendUnavailable(
            f"store backend {backend.name!r} ({backend.distribution} {backend.version}) cannot "
            f"import its {what} {spec!r}: {type(exc).__name__}: {exc}; reinstall "
            f"{backend.distribution} (pip install --force-reinstall {backend.distribution})"
        ) from exc


def store_class(backend: StoreBackend, *, asynchronous: bool = False) -> type[Any]:
    """Import the backend's sync (or async) store class."""
    spec = backend.async_store if asynchronous else backend.store
    cls = _load(backend, spec, "async store class" if asynchronous else "store class")
    if not isinstance(cls, type):
        raise BackendUnavailable(
            f"store backend {backend.name!r}: {spec!r} is a {type(cls).__name__}, not a class"
        )
    return cls


def open_store(url: str, *, create: bool = True, **knobs: Any) -> ExecutionStore:
    """Open the sync store for ``url`` through its backend's ``from_url(url, **knobs)``.

    With ``create=False`` (read-only tools) storage that does not exist yet is not created:
    :class:`~harel.store.errors.StoreNotFound` instead (a backend that cannot tell is opened
    as usual; see :mod:`harel.registry._exists`).  Raises InvalidStoreURL (malformed URL),
    UnknownScheme (no backend for the scheme; names the installed schemes and the ``pip
    install`` line of a first-party backend) or BackendUnavailable.  Messages never contain
    the URL's password.
    """
    backend = REGISTRY.for_url(url)
    if not create:
        _require_existing(backend, url, knobs)
    cls = store_class(backend)
    store: ExecutionStore = cls.from_url(url, **knobs)
    return store


def _require_existing(backend: StoreBackend, url: str, knobs: dict[str, Any]) -> None:
    from harel.registry._exists import store_exists
    from harel.store.common.urls import redact_url
    from harel.store.errors import StoreNotFound

    if store_exists(backend, url, **knobs) is False:
        raise StoreNotFound(
            f"there is no {backend.name} store at {redact_url(url)} (nothing was created): "
            "check the URL, or run a command that writes (harel run, harel send) to create it"
        )


async def open_async_store(url: str, *, create: bool = True, **knobs: Any) -> AsyncExecutionStore:
    """The async twin of :func:`open_store` (awaits the async class's ``from_url``); the
    ``create=False`` check runs in a worker thread, so its retries never block the loop."""
    backend = REGISTRY.for_url(url)
    if not create:
        import anyio.to_thread

        await anyio.to_thread.run_sync(functools.partial(_require_existing, backend, url, knobs))
    cls = store_class(backend, asynchronous=True)
    result = cls.from_url(url, **knobs)
    if inspect.isawaitable(result):
        result = await result
    store: AsyncExecutionStore = result
    return store


def harness_spec(backend: StoreBackend) -> str:
    """The backend's harness import string; HarnessUnavailable when it ships none."""
    if backend.harness is None:
        raise HarnessUnavailable(
            f"store backend {backend.name!r} ({backend.distribution}) ships no conformance "
            "harness, so `harel conformance URL` cannot test it; run the kit from the "
            "backend's own tests (a ConformanceSuite subclass with a harel_harness fixture)"
        )
    return backend.harness


def harness_for_url(url: str, workdir: str | Path) -> StoreHarness:
    """A conformance harness over an isolated, empty dataset derived from ``url``."""
    from harel.conformance.harness import StoreHarness

    backend = REGISTRY.for_url(url)
    factory = _load(backend, harness_spec(backend), "conformance harness")
    if not callable(factory):
        raise PluginError(
            f"store backend {backend.name!r}: harness {backend.harness!r} is not callable"
        )
    harness = factory(url, Path(workdir))
    if not isinstance(harness, StoreHarness):
        raise PluginError(
            f"store backend {backend.name!r}: {backend.harness!r} returned "
            f"{type(harness).__name__}, not a harel.conformance.harness.StoreHarness"
        )
    return harness


def resolve_public_name(name: str) -> Any:
    """``from harel import SqliteStore``: a backend store class, imported through the registry.

    An uninstalled first-party backend raises ImportError (BackendNotInstalled) naming the
    ``pip install`` line; a name that is not a store class raises AttributeError at once
    (dunders and private names never trigger plugin discovery).
    """
    if name.startswith("_") or not _STORE_CLASS_NAME.match(name):
        raise AttributeError(f"module 'harel' has no attribute {name!r}")
    known = first_party_for_class(name)
    if known is not None:
        entry, asynchronous = known
        try:
            backend = REGISTRY.get(entry.name)
        except BackendNotInstalled as exc:
            raise BackendNotInstalled(
                f"{name} is provided by the {entry.distribution} distribution, which is not "
                f"installed: {entry.pip_line}",
                distribution=entry.distribution,
            ) from exc
        except BackendUnavailable as exc:
            raise ImportError(f"cannot import {name} from harel: {exc}", name="harel") from exc
        return _public_class(name, backend, asynchronous)
    for backend in REGISTRY.backends().values():
        for asynchronous, spec in ((False, backend.store), (True, backend.async_store)):
            if spec.rpartition(":")[2].rpartition(".")[2] == name:
                return _public_class(name, backend, asynchronous)
    raise AttributeError(f"module 'harel' has no attribute {name!r}")


def _public_class(name: str, backend: StoreBackend, asynchronous: bool) -> type[Any]:
    try:
        return store_class(backend, asynchronous=asynchronous)
    except BackendUnavailable as exc:
        raise ImportError(f"cannot import {name} from harel: {exc}", name="harel") from exc


def check_backend(backend: StoreBackend) -> list[str]:
    """Import the backend's classes (and harness) and return what is wrong (empty: all good).

    Checks that both classes import, have ``from_url`` and declare the same
    ``capabilities`` the plugin registered, and that the ``exists`` hook (if any) imports.
    """
    problems: list[str] = []
    for asynchronous in (False, True):
        try:
            cls = store_class(backend, asynchronous=asynchronous)
        except BackendUnavailable as exc:
            problems.append(str(exc))
            continue
        if not callable(getattr(cls, "from_url", None)):
            problems.append(f"{cls.__qualname__} has no from_url(url, **knobs) classmethod")
        declared = getattr(cls, "capabilities", None)
        if declared != backend.capabilities:
            problems.append(
                f"{cls.__qualname__}.capabilities ({declared!r}) differs from the registered "
                f"capabilities ({backend.capabilities!r})"
            )
    for field_name, spec, what in (
        ("exists", backend.exists, "existence check"),
        ("harness", backend.harness, "conformance harness"),
    ):
        if spec is None:
            continue
        try:
            target = _load(backend, spec, what)
        except BackendUnavailable as exc:
            problems.append(str(exc))
        else:
            if not callable(target):
                problems.append(f"{field_name} {spec!r} is not callable")
    return problems
