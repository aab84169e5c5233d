"""The registry: entry-point discovery (once, isolated per plugin), de-duplication, lookups."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace

import pluggy
from packaging.utils import canonicalize_name

from harel.registry._compat import core_version, incompatibility
from harel.registry._descriptor import (
    ENTRY_POINT_GROUP,
    PROJECT,
    BackendInfo,
    BackendStatus,
    HookSpecs,
    StoreBackend,
    validate_backend,
)
from harel.registry._firstparty import FIRST_PARTY, first_party_for_scheme, first_party_schemes
from harel.store.common.urls import add_scheme_source, close_scheme, parse_store_url
from harel.store.errors import (
    BackendNotInstalled,
    BackendUnavailable,
    PluginError,
    UnknownBackend,
    UnknownScheme,
)

LOAD_VAR = "HAREL_LOAD_PLUGINS"
DISABLE_VAR = "HAREL_DISABLE_PLUGINS"
STRICT_VAR = "HAREL_STRICT_PLUGINS"
PREFER_VAR = "HAREL_PREFER_PLUGINS"


class PluginWarning(UserWarning):
    """A store plugin is broken, incompatible or conflicting (reported once per discovery)."""


def _claim(backend: StoreBackend, dist: str, version: str, ep: str | None) -> BackendInfo:
    """The row of a registered backend (``ep``: its entry point, ``None`` at run time)."""
    caps = backend.capabilities
    return BackendInfo(backend.name, dist, version, backend.schemes, caps, "ok", None, backend, ep)


def _backend(row: BackendInfo) -> StoreBackend:
    assert row.backend is not None  # every claim carries its descriptor
    return row.backend


def _same(left: str, right: str) -> bool:
    return canonicalize_name(left) == canonicalize_name(right)


def _conflict(key: str, rivals: list[BackendInfo]) -> str:
    """Why ``rivals`` cannot share ``key`` (a backend name, or a URL scheme with ``://``)."""
    if key.endswith("://"):
        listed = " and ".join(f"{r.name!r} ({r.distribution} {r.version})" for r in rivals)
        text = f"URL scheme {key!r} is claimed by backends {listed}"
    else:
        listed = " and ".join(f"{r.distribution} {r.version} ({_backend(r).store})" for r in rivals)
        text = f"backend {key!r} is registered with different implementations by {listed}"
    choices = " or ".join(f"{DISABLE_VAR}={rival.distribution}" for rival in rivals)
    return f"{text}; choose one explicitly ({choices}, or {PREFER_VAR}/{LOAD_VAR})"


def _contest(
    claims: list[BackendInfo],
    keys: Callable[[BackendInfo], Iterable[str]],
    preferred: Callable[[BackendInfo], bool],
    lost: dict[int, tuple[BackendInfo, BackendStatus, str]],
) -> list[BackendInfo]:
    """Settle claims that share a key: preferred ones disable the others; several left
    conflict (all ``broken``, yet still contesting their other keys).  Returns the winners."""
    groups: dict[str, list[BackendInfo]] = {}
    for claim in claims:
        for key in keys(claim):
            groups.setdefault(key, []).append(claim)
    for key, group in sorted(groups.items()):
        rivals = [claim for claim in group if lost.get(id(claim), (claim, "broken"))[1] == "broken"]
        chosen = [rival for rival in rivals if preferred(rival)] or rivals
        note = f" (scheme {key!r})" if key.endswith("://") else ""
        for rival in rivals:
            if all(rival is not winner for winner in chosen):
                why = f"overridden by {PREFER_VAR}={chosen[0].distribution}{note}"
                lost[id(rival)] = (rival, "disabled", why)
        for rival in chosen if len(chosen) > 1 else ():
            lost.setdefault(id(rival), (rival, "broken", _conflict(key, chosen)))
    return [claim for claim in claims if id(claim) not in lost]


def _resolve(claims: Iterable[BackendInfo], prefer: frozenset[str]) -> _Resolved:
    """Pure: the usable claims by name, and the others with their status and error.

    Never decided by install order: identical twins count once; a third-party claim on a
    first-party backend's name or scheme is ``ignored`` unless its distribution is preferred;
    other claims on one name or scheme conflict until one is disabled or preferred.
    """

    def preferred(claim: BackendInfo) -> bool:
        return any(_same(item, claim.distribution) for item in prefer)

    lost: dict[int, tuple[BackendInfo, BackendStatus, str]] = {}
    seen: set[tuple[str, tuple[str, str]]] = set()
    alive: list[BackendInfo] = []
    for claim in claims:
        if (claim.name, _backend(claim).targets) in seen:
            continue
        seen.add((claim.name, _backend(claim).targets))
        owners = [(f"the name {claim.name!r}", FIRST_PARTY.get(claim.name))]
        owners += [(f"the scheme {s + '://'!r}", first_party_for_scheme(s)) for s in claim.schemes]
        clashes = [(t, o) for t, o in owners if o and not _same(o.distribution, claim.distribution)]
        if not clashes or preferred(claim):
            alive.append(claim)
            continue
        what = " and ".join(text for text, _ in clashes)
        taken = ", ".join(dict.fromkeys(f"{o.name!r} ({o.distribution})" for _, o in clashes))
        why = (
            f"{claim.distribution} {claim.version} registers backend {claim.name!r} with {what} "
            f"of the first-party backend {taken}; ignored, the first-party backend keeps it (to "
            f"use {claim.distribution}'s instead, set {PREFER_VAR}={claim.distribution})"
        )
        lost[id(claim)] = (claim, "ignored", why)
    named = _contest(alive, lambda claim: (claim.name,), preferred, lost)
    usable = _contest(named, lambda claim: [s + "://" for s in claim.schemes], preferred, lost)
    rows = [replace(claim, status=status, error=error) for claim, status, error in lost.values()]
    return {claim.name: claim for claim in usable}, rows


_Resolved = tuple[dict[str, BackendInfo], list[BackendInfo]]


def _problems(rows: list[BackendInfo]) -> list[str]:
    """The messages to report: conflicts, then claims on first-party names or schemes."""
    rows = [row for row in rows if row.status in ("broken", "ignored")]
    return list(dict.fromkeys(str(row.error) for row in sorted(rows, key=lambda r: r.status)))


def _items(value: str | None) -> set[str]:
    return {item.strip() for item in (value or "").split(",") if item.strip()}


def _selected(items: set[str], ep_name: str, distribution: str) -> bool:
    """Whether an item is ``*``, the entry point's name, its distribution or ``dist:name``."""
    for item in items:
        dist, _, name = item.rpartition(":")
        if item in ("*", ep_name) or _same(item, distribution):
            return True
        if dist and _same(dist, distribution) and name == ep_name:
            return True
    return False


def _dist_name(dist: importlib.metadata.Distribution | None) -> str:
    name = None if dist is None else dist.metadata["Name"]
    return str(name) if name else "<unknown distribution>"


class Registry:
    """The store backends this process knows, discovered from entry points on first use
    (once; :meth:`reset` forgets everything, run-time registrations too).  Thread-safe;
    ``environ`` (default ``os.environ``) holds the switches."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ
        self._lock = threading.RLock()
        self.reset()

    def _switch(self, name: str) -> str:
        return (os.environ if self._environ is None else self._environ).get(name, "")

    @property
    def discovered(self) -> bool:
        """Whether entry-point discovery has run since creation or the last :meth:`reset`."""
        return self._discovered

    def reset(self) -> None:
        """Forget all backends; the next use re-reads entry points and switches."""
        with self._lock:
            self._discovered = False
            self.plugin_manager = pluggy.PluginManager(PROJECT)
            self.plugin_manager.add_hookspecs(HookSpecs)
            self._claims: list[BackendInfo] = []
            self._failed: list[BackendInfo] = []  # entry points that registered nothing usable
            self._ok: dict[str, BackendInfo] = {}
            self._aside: list[BackendInfo] = []
        importlib.invalidate_caches()

    def _resolve(self, claims: list[BackendInfo]) -> _Resolved:
        return _resolve(claims, frozenset(_items(self._switch(PREFER_VAR))))

    def ensure_discovered(self) -> None:
        """Walk the ``harel.stores`` entry points once (no-op after the first call)."""
        with self._lock:
            if not self._discovered:
                self.reset()  # a strict-mode failure may have left a partial state behind
                self._discover()
                self._discovered = True

    def _discover(self) -> None:
        errors: list[PluginError] = []
        try:
            entry_points = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
        except Exception as exc:  # corrupt metadata must not break the host
            errors.append(PluginError(f"cannot read {ENTRY_POINT_GROUP} entry points: {exc}"))
            entry_points = []
        version = core_version()
        for ep in sorted(entry_points, key=lambda ep: (ep.name, _dist_name(ep.dist), ep.value)):
            errors += self._load_entry_point(ep, version)
        self._ok, self._aside = self._resolve(self._claims)
        errors += [PluginError(message) for message in _problems(self._aside)]
        if errors and self._switch(STRICT_VAR).strip().lower() in ("1", "true", "yes", "on"):
            raise errors[0]
        for report in dict.fromkeys(str(error) for error in errors):
            # attributed to the registry, the warning prints no source line of the caller's
            warnings.warn_explicit(report, PluginWarning, filename="harel.registry", lineno=0)

    def _load_entry_point(self, ep: importlib.metadata.EntryPoint, core: str) -> list[PluginError]:
        """Record one entry point's backends (or its problem row); the errors to report."""
        dist = _dist_name(ep.dist)
        label = f"{ep.name} = {ep.value}"
        known = FIRST_PARTY.get(ep.name)
        schemes = known.schemes if known and _same(known.distribution, dist) else ()
        version = None if ep.dist is None else ep.dist.version
        row = BackendInfo(ep.name, dist, version, schemes, None, "disabled", entry_point=label)
        load, disable = self._switch(LOAD_VAR), self._switch(DISABLE_VAR)
        if _items(load) and not _selected(_items(load), ep.name, dist):
            self._failed.append(replace(row, error=f"not listed in {LOAD_VAR}={load}"))
            return []
        if _selected(_items(disable), ep.name, dist):
            self._failed.append(replace(row, error=f"disabled by {DISABLE_VAR}={disable}"))
            return []
        status: BackendStatus = "incompatible"
        reason, cause = incompatibility(ep.dist, core), None
        if reason is None:
            try:
                backends = self._collect(ep.load(), f"{dist}:{ep.name}")
            except (Exception, SystemExit) as exc:
                status, reason, cause = "broken", f"{type(exc).__name__}: {exc}", exc
            else:
                self._claims += [_claim(b, dist, version or b.version, label) for b in backends]
                return []
        self._failed.append(replace(row, status=status, error=reason))
        report = PluginError(f"store plugin {label!r} ({dist}) is {status}: {reason}")
        report.__cause__ = cause
        return [report]

    def _collect(self, plugin: object, name: str | None = None) -> list[StoreBackend]:
        """Run ``plugin``'s hook alone and return what it registered (validated)."""
        collected: list[StoreBackend] = []
        manager = self.plugin_manager
        added = not manager.is_registered(plugin)
        if added:
            manager.register(plugin, name=name if manager.get_plugin(name or "") is None else None)
        try:
            others = [other for other in manager.get_plugins() if other is not plugin]
            caller = manager.subset_hook_caller("harel_register_stores", remove_plugins=others)
            caller(register=lambda backend: collected.append(validate_backend(backend)))
            if not collected:
                raise PluginError(
                    "registered no backend (does it define harel_register_stores decorated "
                    "with @harel.registry.hookimpl and call register(StoreBackend(...))?)"
                )
        except BaseException:
            if added:
                manager.unregister(plugin)
            raise
        return collected

    def register(self, plugin: object) -> list[StoreBackend]:
        """Register a plugin (with a ``harel_register_stores`` hookimpl) or a
        :class:`StoreBackend` in this process; returns the backends it added.

        PluginError for garbage, a conflict with a known backend or a claim on a first-party
        name or scheme (unless preferred); an identical twin is a no-op.
        """
        self.ensure_discovered()
        with self._lock:
            try:
                single = isinstance(plugin, StoreBackend)
                backends = [validate_backend(plugin)] if single else self._collect(plugin)
            except PluginError:
                raise
            except Exception as exc:
                raise PluginError(
                    f"plugin {plugin!r} failed to register: {type(exc).__name__}: {exc}"
                ) from exc
            claims = [_claim(b, b.distribution, b.version, None) for b in backends]
            ok, aside = self._resolve([*self._claims, *claims])
            known = set(_problems(self._aside))
            new = [message for message in _problems(aside) if message not in known]
            if new:
                raise PluginError(new[0])
            self._claims += claims
            self._ok, self._aside = ok, aside
            return backends

    def unregister(self, name: str) -> None:
        """Forget every registration of backend ``name`` (UnknownBackend when there is none)."""
        self.ensure_discovered()
        with self._lock:
            claims = [claim for claim in self._claims if claim.name != name]
            failed = [row for row in self._failed if row.name != name]
            if len(claims) + len(failed) == len(self._claims) + len(self._failed):
                raise UnknownBackend(f"no store backend named {name!r} is registered")
            self._claims, self._failed = claims, failed
            self._ok, self._aside = self._resolve(claims)

    def backends(self) -> dict[str, StoreBackend]:
        """The usable backends by name."""
        self.ensure_discovered()
        return {name: _backend(row) for name, row in self._ok.items()}

    def schemes(self) -> dict[str, str]:
        """URL scheme -> usable backend name."""
        self.ensure_discovered()
        return {scheme: name for name, row in self._ok.items() for scheme in row.schemes}

    def available(self, *, include_not_installed: bool = False) -> list[BackendInfo]:
        """Every backend row, usable or not (with ``include_not_installed`` also the absent
        first-party ones); imports no driver."""
        self.ensure_discovered()
        rows = [*self._ok.values(), *self._failed, *self._aside]
        present = {row.name for row in rows}
        rows += [
            BackendInfo(e.name, e.distribution, None, e.schemes, None, "not installed", e.pip_line)
            for e in FIRST_PARTY.values()
            if include_not_installed and e.name not in present
        ]
        return sorted(rows, key=lambda row: (row.name, row.distribution))

    def _unusable(self) -> Iterator[tuple[BackendInfo, str]]:
        """The rows that cannot be used, conflicts first, each with why."""

        def conflict(row: BackendInfo) -> bool:
            return row.status == "broken" and row.backend is not None

        for row in sorted([*self._failed, *self._aside], key=lambda row: not conflict(row)):
            where = "" if conflict(row) else f" ({row.distribution})"
            yield row, f"store backend {row.name!r}{where} is {row.status}: {row.error}"

    def get(self, name: str) -> StoreBackend:
        """The usable backend ``name``: else BackendNotInstalled (first-party, with the pip
        line), BackendUnavailable (installed but not usable: why) or UnknownBackend."""
        self.ensure_discovered()
        if name in self._ok:
            return _backend(self._ok[name])
        reason = next((why for row, why in self._unusable() if row.name == name), None)
        if reason is not None:
            raise BackendUnavailable(reason)
        known = FIRST_PARTY.get(name)
        if known is not None:
            message = f"store backend {name!r} is not installed: {known.pip_line}"
            raise BackendNotInstalled(message, distribution=known.distribution)
        missing = ", ".join(n for n in FIRST_PARTY if n not in self._ok)
        raise UnknownBackend(
            f"no store backend named {name!r}; installed: {', '.join(sorted(self._ok)) or 'none'}"
            + (f"; first-party backends you can install: {missing}" if missing else "")
        )

    def for_url(self, url: str) -> StoreBackend:
        """The usable backend for ``url``'s scheme: else InvalidStoreURL (malformed),
        UnknownScheme (naming the installed schemes, or a first-party backend's pip line) or
        BackendUnavailable; messages never show the URL's password."""
        parsed = parse_store_url(url)
        scheme, schemes = parsed.scheme, self.schemes()
        if scheme in schemes:
            return _backend(self._ok[schemes[scheme]])
        reason = next((why for row, why in self._unusable() if scheme in row.schemes), None)
        if reason is not None:
            raise BackendUnavailable(f"cannot open {parsed.redacted}: {reason}")
        installed = ", ".join(sorted(schemes)) or "none"
        known = first_party_for_scheme(scheme)
        if known is not None:
            raise UnknownScheme(
                f"{scheme}:// URLs need the {known.name!r} store backend, which is not "
                f"installed: {known.pip_line} (installed schemes: {installed})"
            )
        related: list[str] = []
        others: list[str] = []
        for row in self._failed:  # never registered, so their schemes are unknown
            if row.status != "disabled":
                names = (row.name.lower(), canonicalize_name(row.distribution))
                mine = any(scheme in name or (name and name in scheme) for name in names)
                version = f" {row.version}" if row.version else ""
                text = f"{row.name} ({row.distribution}{version}) is {row.status}: {row.error}"
                (related if mine else others).append(text)
        failed = f"installed but failed to load: {'; '.join(related + others)}"
        if related:
            raise BackendUnavailable(
                f"cannot open {parsed.redacted}: no loaded store backend handles {scheme}:// "
                f"URLs; {failed}"
            )
        close = close_scheme(scheme, {*schemes, *first_party_schemes()})
        hint = f" (did you mean {close}://?)" if close and close != scheme else ""
        raise UnknownScheme(
            f"no installed store backend handles {scheme}:// URLs ({parsed.redacted}){hint}; "
            f"installed schemes: {installed}" + (f"; {failed}" if others else "")
        )


REGISTRY = Registry()
"""The process-wide registry; the module-level functions below are its methods."""
add_scheme_source(lambda: REGISTRY.schemes() if REGISTRY.discovered else ())
available_backends = REGISTRY.available
get_backend = REGISTRY.get
backend_for_url = REGISTRY.for_url
register = REGISTRY.register
unregister = REGISTRY.unregister
reset = REGISTRY.reset
