"""From a backend descriptor to classes, stores, harnesses and existence checks (the only
place the registry imports a backend's code)."""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harel.registry._core import REGISTRY
from harel.registry._descriptor import StoreBackend
from harel.registry._firstparty import FIRST_PARTY
from harel.store.common.urls import redact_url
from harel.store.contract import AsyncExecutionStore, ExecutionStore
from harel.store.errors import (
    BackendNotInstalled,
    BackendUnavailable,
    HarnessUnavailable,
    PluginError,
    StoreNotFound,
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


def _load(backend: StoreBackend, spec: str, what: str, *, call: bool = False) -> Any:
    """Import ``backend``'s ``spec`` (BackendUnavailable naming the reinstall; with ``call``,
    PluginError when it is not callable)."""
    try:
        target = import_object(spec)
    except Exception as exc:
        raise BackendUnavailable(
            f"store backend {backend.name!r} ({backend.distribution} {backend.version}) cannot "
            f"import its {what} {spec!r}: {type(exc).__name__}: {exc}; reinstall "
            f"{backend.distribution} (pip install --force-reinstall {backend.distribution})"
        ) from exc
    if call and not callable(target):
        raise PluginError(f"store backend {backend.name!r}: {what} {spec!r} is not callable")
    return target


def store_class(backend: StoreBackend, *, asynchronous: bool = False) -> type[Any]:
    """Import the backend's sync (or async) store class (BackendUnavailable otherwise)."""
    spec = backend.async_store if asynchronous else backend.store
    cls = _load(backend, spec, "async store class" if asynchronous else "store class")
    if not isinstance(cls, type):
        raise BackendUnavailable(
            f"store backend {backend.name!r}: {spec!r} is a {type(cls).__name__}, not a class"
        )
    return cls


def store_exists(backend: StoreBackend, url: str, **knobs: Any) -> bool | None:
    """Whether ``url`` names existing storage, through the backend's ``exists`` hook
    (``None``: the backend cannot tell); creates nothing."""
    if backend.exists is None:
        return None
    return bool(_load(backend, backend.exists, "existence check", call=True)(url, **knobs))


def _require_existing(backend: StoreBackend, url: str, knobs: dict[str, Any]) -> None:
    if store_exists(backend, url, **knobs) is False:
        raise StoreNotFound(
            f"there is no {backend.name} store at {redact_url(url)} (nothing was created): "
            "check the URL, or run a command that writes (harel run, harel send) to create it"
        )


def open_store(url: str, *, create: bool = True, **knobs: Any) -> ExecutionStore:
    """Open the sync store for ``url`` through its backend's ``from_url(url, **knobs)``.

    ``create=False`` (read-only tools) raises StoreNotFound instead of creating storage (a
    backend that cannot tell is opened as usual).  Errors: those of
    :meth:`~harel.registry._core.Registry.for_url` and BackendUnavailable.
    """
    backend = REGISTRY.for_url(url)
    if not create:
        _require_existing(backend, url, knobs)
    store: ExecutionStore = store_class(backend).from_url(url, **knobs)
    return store


async def open_async_store(url: str, *, create: bool = True, **knobs: Any) -> AsyncExecutionStore:
    """The async twin of :func:`open_store`; the ``create=False`` check runs in a worker
    thread, so its retries never block the loop."""
    backend = REGISTRY.for_url(url)
    if not create:
        import anyio.to_thread

        await anyio.to_thread.run_sync(functools.partial(_require_existing, backend, url, knobs))
    result = store_class(backend, asynchronous=True).from_url(url, **knobs)
    store: AsyncExecutionStore = await result if inspect.isawaitable(result) else result
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
    factory = _load(backend, harness_spec(backend), "conformance harness", call=True)
    harness = factory(url, Path(workdir))
    if not isinstance(harness, StoreHarness):
        raise PluginError(
            f"store backend {backend.name!r}: {backend.harness!r} returned "
            f"{type(harness).__name__}, not a harel.conformance.harness.StoreHarness"
        )
    return harness


def resolve_public_name(name: str) -> Any:
    """``from harel import SqliteStore``: a backend's store class, through the registry.

    ImportError when it cannot be imported (BackendNotInstalled with the pip line for an
    uninstalled first-party class); AttributeError at once for a name that is not a store
    class (dunders and private names never trigger plugin discovery).
    """
    if name.startswith("_") or not _STORE_CLASS_NAME.match(name):
        raise AttributeError(f"module 'harel' has no attribute {name!r}")
    try:
        for entry in FIRST_PARTY.values():
            if name in (entry.store_class, entry.async_store_class):
                try:
                    backend = REGISTRY.get(entry.name)
                except BackendNotInstalled as exc:
                    raise BackendNotInstalled(
                        f"{name} is provided by the {entry.distribution} distribution, which is "
                        f"not installed: {entry.pip_line}",
                        distribution=entry.distribution,
                    ) from exc
                return store_class(backend, asynchronous=name == entry.async_store_class)
        for backend in REGISTRY.backends().values():
            for asynchronous, spec in ((False, backend.store), (True, backend.async_store)):
                if spec.rpartition(":")[2].rpartition(".")[2] == name:
                    return store_class(backend, asynchronous=asynchronous)
    except BackendUnavailable as exc:
        raise ImportError(f"cannot import {name} from harel: {exc}", name="harel") from exc
    raise AttributeError(f"module 'harel' has no attribute {name!r}")


def check_backend(backend: StoreBackend) -> list[str]:
    """What is wrong with the backend's code (empty: all good): both classes import, have
    ``from_url`` and declare the registered ``capabilities``; ``exists`` and ``harness``
    (when set) import and are callable."""
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
    for spec, what in (
        (backend.exists, "existence check"),
        (backend.harness, "conformance harness"),
    ):
        if spec is not None:
            try:
                _load(backend, spec, what, call=True)
            except (BackendUnavailable, PluginError) as exc:
                problems.append(str(exc))
    return problems
