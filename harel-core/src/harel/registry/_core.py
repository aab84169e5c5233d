"""The registry: entry-point discovery (once, isolated per plugin), de-duplication, lookups."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import threading
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

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
from harel.registry._firstparty import FIRST_PARTY, FirstParty, first_party_for_scheme
from harel.store.common.urls import parse_store_url
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
_TRUE = {"1", "true", "yes", "on"}


class PluginWarning(UserWarning):
    """A store plugin is broken, incompatible or conflicting (reported once per discovery)."""


def _report(message: str) -> None:
    """Warn about a plugin problem, attributed to the registry: the default warning format
    then prints no Python source line (the problem is in the plugin, not in the caller)."""
    warnings.warn_explicit(message, PluginWarning, filename="harel.registry", lineno=0)


@dataclass(frozen=True)
class _Claim:
    """One registered backend and where it came from."""

    backend: StoreBackend
    distribution: str
    version: str
    entry_point: str | None  # "name = target", None when registered at run time


@dataclass
class _Resolution:
    ok: dict[str, _Claim] = field(default_factory=dict)
    schemes: dict[str, str] = field(default_factory=dict)
    conflicts: dict[str, tuple[str, list[_Claim]]] = field(default_factory=dict)
    set_aside: list[tuple[_Claim, BackendStatus, str]] = field(default_factory=list)


def _describe(claim: _Claim) -> str:
    return f"{claim.distribution} {claim.version} ({claim.backend.store})"


def _same_dist(left: str, right: str) -> bool:
    return canonicalize_name(left) == canonicalize_name(right)


def _preferred(claim: _Claim, prefer: frozenset[str]) -> bool:
    return any(_same_dist(item, claim.distribution) for item in prefer)


def _first_party_clashes(claim: _Claim) -> list[tuple[str, FirstParty]]:
    """What of a first-party backend ``claim`` takes although it is not that distribution."""
    clashes: list[tuple[str, FirstParty]] = []
    entry = FIRST_PARTY.get(claim.backend.name)
    if entry is not None and not _same_dist(entry.distribution, claim.distribution):
        clashes.append((f"the name {entry.name!r}", entry))
    for scheme in claim.backend.schemes:
        owner = first_party_for_scheme(scheme)
        if owner is not None and not _same_dist(owner.distribution, claim.distribution):
            clashes.append((f"the scheme {scheme + '://'!r}", owner))
    return clashes


def _reserve_first_party(
    claims: list[_Claim], prefer: frozenset[str], result: _Resolution
) -> list[_Claim]:
    """First-party backends keep their names and schemes: a third-party claim on them is set
    aside as ``ignored`` unless its distribution is in ``HAREL_PREFER_PLUGINS``, in which case
    the first-party backend it clashes with is set aside instead (``disabled``)."""
    kept: list[_Claim] = []
    overridden: dict[str, str] = {}
    for claim in claims:
        clashes = _first_party_clashes(claim)
        if not clashes:
            kept.append(claim)
            continue
        if _preferred(claim, prefer):
            kept.append(claim)
            for _, entry in clashes:
                overridden.setdefault(entry.name, claim.distribution)
            continue
        what = " and ".join(dict.fromkeys(text for text, _ in clashes))
        owners = ", ".join(
            dict.fromkeys(f"{entry.name!r} ({entry.distribution})" for _, entry in clashes)
        )
        result.set_aside.append(
            (
                claim,
                "ignored",
                f"{claim.distribution} {claim.version} registers backend {claim.backend.name!r} "
                f"with {what} of the first-party backend {owners}; ignored, the first-party "
                f"backend keeps it (to use {claim.distribution}'s instead, set "
                f"{PREFER_VAR}={claim.distribution})",
            )
        )
    final: list[_Claim] = []
    for claim in kept:
        table_entry = FIRST_PARTY.get(claim.backend.name)
        winner = overridden.get(claim.backend.name)
        if (
            winner is not None
            and table_entry is not None
            and _same_dist(table_entry.distribution, claim.distribution)
        ):
            result.set_aside.append(
                (
                    claim,
                    "disabled",
                    f"overridden by {PREFER_VAR}: {winner} claims its name or a scheme",
                )
            )
            continue
        final.append(claim)
    return final


def _resolve(claims: Iterable[_Claim], prefer: frozenset[str] = frozenset()) -> _Resolution:
    """Pure: which claims are usable, which are set aside, which names/schemes conflict.

    Never decided by install order: first-party backends keep their names and schemes
    (unless the user prefers another distribution), and two third-party claims on one name
    or scheme conflict until one is disabled or preferred.
    """
    result = _Resolution()
    unique: list[_Claim] = []
    for claim in claims:
        if all(
            other.backend.name != claim.backend.name
            or other.backend.targets != claim.backend.targets
            for other in unique
        ):
            unique.append(claim)
    by_name: dict[str, list[_Claim]] = {}
    for claim in _reserve_first_party(unique, prefer, result):
        by_name.setdefault(claim.backend.name, []).append(claim)
    for name, distinct in sorted(by_name.items()):
        winners = [claim for claim in distinct if _preferred(claim, prefer)]
        if len(distinct) > 1 and len(winners) == 1:
            for claim in distinct:
                if claim is not winners[0]:
                    result.set_aside.append(
                        (claim, "disabled", f"overridden by {PREFER_VAR}={winners[0].distribution}")
                    )
            distinct = winners
        if len(distinct) == 1:
            result.ok[name] = distinct[0]
            continue
        listed = " and ".join(_describe(claim) for claim in distinct)
        choices = " or ".join(f"{DISABLE_VAR}={claim.distribution}" for claim in distinct)
        result.conflicts[name] = (
            f"backend {name!r} is registered with different implementations by {listed}; "
            f"choose one explicitly ({choices}, or {PREFER_VAR}/{LOAD_VAR})",
            distinct,
        )
    by_scheme: dict[str, list[str]] = {}
    for name, claim in result.ok.items():
        for scheme in claim.backend.schemes:
            by_scheme.setdefault(scheme, []).append(name)
    for scheme, names in sorted(by_scheme.items()):
        if len(names) < 2:
            continue
        preferred = [name for name in names if _preferred(result.ok[name], prefer)]
        if len(preferred) == 1:
            for name in names:
                if name != preferred[0] and name in result.ok:
                    result.set_aside.append(
                        (
                            result.ok.pop(name),
                            "disabled",
                            f"overridden by {PREFER_VAR}={result.ok[preferred[0]].distribution} "
                            f"(scheme {scheme + '://'!r})",
                        )
                    )
            continue
        listed = " and ".join(
            f"{result.ok[name].backend.name!r} ({result.ok[name].distribution} "
            f"{result.ok[name].version})"
            for name in names
            if name in result.ok
        )
        choices = " or ".join(
            f"{DISABLE_VAR}={result.ok[name].distribution}" for name in names if name in result.ok
        )
        message = (
            f"URL scheme {scheme + '://'!r} is claimed by backends {listed}; "
            f"choose one explicitly ({choices}, or {PREFER_VAR}/{LOAD_VAR})"
        )
        for name in names:
            if name in result.ok:
                result.conflicts.setdefault(name, (message, [result.ok[name]]))
    for name in result.conflicts:
        result.ok.pop(name, None)
    for name, claim in result.ok.items():
        for scheme in claim.backend.schemes:
            result.schemes[scheme] = name
    return result


def _items(value: str | None) -> set[str] | None:
    if value is None or not value.strip():
        return None
    return {item.strip() for item in value.split(",") if item.strip()}


def _selected(items: set[str], ep_name: str, distribution: str) -> bool:
    dist = canonicalize_name(distribution)
    for item in items:
        if item == "*" or item == ep_name or canonicalize_name(item) == dist:
            return True
        if ":" in item:
            dist_part, _, ep_part = item.partition(":")
            if canonicalize_name(dist_part) == dist and ep_part == ep_name:
                return True
    return False


def _new_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(HookSpecs)
    return manager


class Registry:
    """The store backends this process knows: discovered from entry points on first use.

    Thread-safe.  Discovery runs once and is cached; :meth:`reset` forgets everything
    (including run-time registrations) so the next use discovers again.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ
        self._lock = threading.RLock()
        self._discovered = False
        self._clear()

    def _clear(self) -> None:
        self.plugin_manager = _new_manager()
        self._claims: list[_Claim] = []
        self._problems: list[BackendInfo] = []
        self._state = _Resolution()

    @property
    def environ(self) -> Mapping[str, str]:
        """The environment the switches are read from (``os.environ`` by default)."""
        return os.environ if self._environ is None else self._environ

    @property
    def discovered(self) -> bool:
        """Whether entry-point discovery has run since creation or the last :meth:`reset`."""
        return self._discovered

    def reset(self) -> None:
        """Forget all backends; the next use re-reads entry points and switches."""
        with self._lock:
            self._clear()
            self._discovered = False
        importlib.invalidate_caches()

    # ------------------------------------------------------------------ discovery

    def ensure_discovered(self) -> None:
        """Walk the ``harel.stores`` entry points once (no-op after the first call)."""
        if self._discovered:
            return
        with self._lock:
            if self._discovered:
                return
            self._discover()
            self._discovered = True

    def _prefer(self) -> frozenset[str]:
        return frozenset(_items(self.environ.get(PREFER_VAR)) or ())

    def _strict(self) -> bool:
        return self.environ.get(STRICT_VAR, "").strip().lower() in _TRUE

    def _discover(self) -> None:
        self._clear()  # a strict-mode failure may have left a partial state behind
        env = self.environ
        load = _items(env.get(LOAD_VAR))
        disable = _items(env.get(DISABLE_VAR))
        strict = self._strict()
        version = core_version()
        reports: list[str] = []
        try:
            entry_points = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
        except Exception as exc:  # corrupt metadata must not break the host
            if strict:
                raise PluginError(f"cannot read {ENTRY_POINT_GROUP} entry points: {exc}") from exc
            _report(f"cannot read {ENTRY_POINT_GROUP} entry points: {exc}")
            entry_points = []
        entry_points.sort(key=lambda ep: (ep.name, _dist_name(ep.dist), ep.value))
        for ep in entry_points:
            failure = self._load_entry_point(ep, load=load, disable=disable, version=version)
            if failure is not None:
                if strict:
                    raise failure
                reports.append(str(failure))
        self._state = _resolve(self._claims, self._prefer())
        messages = [message for message, _ in self._state.conflicts.values()]
        messages += [message for _, status, message in self._state.set_aside if status == "ignored"]
        for message in messages:
            if strict:
                raise PluginError(message)
            if message not in reports:
                reports.append(message)
        for report in reports:
            _report(report)

    def _load_entry_point(
        self,
        ep: importlib.metadata.EntryPoint,
        *,
        load: set[str] | None,
        disable: set[str] | None,
        version: str,
    ) -> PluginError | None:
        """Record one entry point's backends (or its problem); the error to report, if any."""
        env = self.environ
        dist = ep.dist
        dist_name = _dist_name(dist)
        dist_version = dist.version if dist is not None else None
        label = f"{ep.name} = {ep.value}"
        known = FIRST_PARTY.get(ep.name)
        same = known is not None and (
            canonicalize_name(known.distribution) == canonicalize_name(dist_name)
        )

        def problem(status: BackendStatus, error: str) -> None:
            self._problems.append(
                BackendInfo(
                    name=ep.name,
                    distribution=dist_name,
                    version=dist_version,
                    schemes=known.schemes if known is not None and same else (),
                    capabilities=None,
                    status=status,
                    error=error,
                    entry_point=label,
                )
            )

        if load is not None and not _selected(load, ep.name, dist_name):
            problem("disabled", f"not listed in {LOAD_VAR}={env.get(LOAD_VAR, '')}")
            return None
        if disable is not None and _selected(disable, ep.name, dist_name):
            problem("disabled", f"disabled by {DISABLE_VAR}={env.get(DISABLE_VAR, '')}")
            return None
        reason = incompatibility(dist, version)
        if reason is not None:
            problem("incompatible", reason)
            return PluginError(f"store plugin {label!r} ({dist_name}) is incompatible: {reason}")
        try:
            backends = self._collect(ep.load(), name=f"{dist_name}:{ep.name}")
        except (Exception, SystemExit) as exc:
            error = f"{type(exc).__name__}: {exc}"
            problem("broken", error)
            report = PluginError(f"store plugin {label!r} ({dist_name}) is broken: {error}")
            report.__cause__ = exc
            return report
        self._claims.extend(
            _Claim(backend, dist_name, dist_version or backend.version, label)
            for backend in backends
        )
        return None

    def _collect(self, plugin: object, *, name: str | None = None) -> list[StoreBackend]:
        """Run ``plugin``'s hook alone and return what it registered (validated)."""
        collected: list[StoreBackend] = []

        def register(backend: StoreBackend) -> None:
            collected.append(validate_backend(backend))

        manager = self.plugin_manager
        added = False
        if not manager.is_registered(plugin):
            manager.register(plugin, name=name if manager.get_plugin(name or "") is None else None)
            added = True
        try:
            others = [other for other in manager.get_plugins() if other is not plugin]
            caller = manager.subset_hook_caller("harel_register_stores", remove_plugins=others)
            caller(register=register)
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

    # ------------------------------------------------------------------ run time

    def register(self, plugin: object) -> list[StoreBackend]:
        """Register a plugin (an object with a ``harel_register_stores`` hookimpl) or a
        :class:`StoreBackend` in this process.  Returns the backends it added.

        Raises :class:`PluginError` for garbage, a conflict with a known backend (same
        name or scheme, different implementation) or a claim on a first-party backend's name
        or scheme by another distribution (unless preferred with ``HAREL_PREFER_PLUGINS``);
        an identical twin is a no-op (it is returned but changes nothing).
        """
        self.ensure_discovered()
        with self._lock:
            if isinstance(plugin, StoreBackend):
                backends = [validate_backend(plugin)]
            else:
                try:
                    backends = self._collect(plugin)
                except PluginError:
                    raise
                except Exception as exc:
                    raise PluginError(
                        f"plugin {plugin!r} failed to register: {type(exc).__name__}: {exc}"
                    ) from exc
            claims = [_Claim(b, b.distribution, b.version, None) for b in backends]
            candidate = _resolve([*self._claims, *claims], self._prefer())
            new_conflicts = [
                message
                for name, (message, _) in candidate.conflicts.items()
                if name not in self._state.conflicts
            ]
            new_conflicts += [
                message
                for claim, status, message in candidate.set_aside
                if status == "ignored" and any(claim is new for new in claims)
            ]
            if new_conflicts:
                raise PluginError(new_conflicts[0])
            self._claims.extend(claims)
            self._state = candidate
            return backends

    def unregister(self, name: str) -> None:
        """Forget every registration of backend ``name`` (UnknownBackend when there is none)."""
        self.ensure_discovered()
        with self._lock:
            claims = [c for c in self._claims if c.backend.name != name]
            problems = [p for p in self._problems if p.name != name]
            if len(claims) == len(self._claims) and len(problems) == len(self._problems):
                raise UnknownBackend(f"no store backend named {name!r} is registered")
            self._claims, self._problems = claims, problems
            self._state = _resolve(self._claims, self._prefer())

    # ------------------------------------------------------------------ lookups

    def backends(self) -> dict[str, StoreBackend]:
        """The usable backends by name."""
        self.ensure_discovered()
        return {name: claim.backend for name, claim in self._state.ok.items()}

    def schemes(self) -> dict[str, str]:
        """URL scheme -> usable backend name."""
        self.ensure_discovered()
        return dict(self._state.schemes)

    def available(self, *, include_not_installed: bool = False) -> list[BackendInfo]:
        """Every backend row: usable, broken, incompatible, disabled (and, on request, the
        first-party backends that are not installed)."""
        self.ensure_discovered()
        rows: list[BackendInfo] = []
        for claim in self._state.ok.values():
            rows.append(_info(claim, "ok", None))
        for message, claims in self._state.conflicts.values():
            rows.extend(_info(claim, "broken", message) for claim in claims)
        rows.extend(self._problem_rows())
        if include_not_installed:
            present = {row.name for row in rows}
            for entry in FIRST_PARTY.values():
                if entry.name not in present:
                    rows.append(
                        BackendInfo(
                            name=entry.name,
                            distribution=entry.distribution,
                            version=None,
                            schemes=entry.schemes,
                            capabilities=None,
                            status="not installed",
                            error=entry.pip_line,
                        )
                    )
        return sorted(rows, key=lambda row: (row.name, row.distribution))

    def _problem_rows(self) -> list[BackendInfo]:
        """Broken, incompatible, disabled and ignored rows (not the conflicting ones)."""
        aside = [_info(claim, status, message) for claim, status, message in self._state.set_aside]
        return [*self._problems, *aside]

    def _unusable(self, name: str) -> str | None:
        conflict = self._state.conflicts.get(name)
        if conflict is not None:
            return f"store backend {name!r} is broken: {conflict[0]}"
        for row in self._problem_rows():
            if row.name == name:
                return f"store backend {name!r} ({row.distribution}) is {row.status}: {row.error}"
        return None

    def get(self, name: str) -> StoreBackend:
        """The usable backend ``name``; a specific error says why it is not available."""
        self.ensure_discovered()
        claim = self._state.ok.get(name)
        if claim is not None:
            return claim.backend
        reason = self._unusable(name)
        if reason is not None:
            raise BackendUnavailable(reason)
        known = FIRST_PARTY.get(name)
        if known is not None:
            raise BackendNotInstalled(
                f"store backend {name!r} is not installed: {known.pip_line}",
                distribution=known.distribution,
            )
        raise UnknownBackend(
            f"no store backend named {name!r}; installed: {self._names_text()}"
            f"{self._installable_text()}"
        )

    def for_url(self, url: str) -> StoreBackend:
        """The usable backend for ``url``'s scheme (InvalidStoreURL when ``url`` is malformed)."""
        parsed = parse_store_url(url)
        self.ensure_discovered()
        scheme = parsed.scheme
        name = self._state.schemes.get(scheme)
        if name is not None:
            return self._state.ok[name].backend
        for conflict_name, (message, claims) in self._state.conflicts.items():
            if any(scheme in claim.backend.schemes for claim in claims):
                raise BackendUnavailable(
                    f"cannot open {parsed.redacted}: store backend {conflict_name!r} is broken: "
                    f"{message}"
                )
        for row in self._problem_rows():
            if scheme in row.schemes:
                raise BackendUnavailable(
                    f"cannot open {parsed.redacted}: store backend {row.name!r} "
                    f"({row.distribution}) is {row.status}: {row.error}"
                )
        installed = ", ".join(sorted(self._state.schemes)) or "none"
        known = first_party_for_scheme(scheme)
        if known is not None:
            raise UnknownScheme(
                f"{scheme}:// URLs need the {known.name!r} store backend, which is not "
                f"installed: {known.pip_line} (installed schemes: {installed})"
            )
        related, others = self._failed_to_load(scheme)
        if related:
            raise BackendUnavailable(
                f"cannot open {parsed.redacted}: no loaded store backend handles {scheme}:// "
                f"URLs; installed but failed to load: {'; '.join(related + others)}"
            )
        note = f"; installed but failed to load: {'; '.join(others)}" if others else ""
        raise UnknownScheme(
            f"no installed store backend handles {scheme}:// URLs ({parsed.redacted})"
            f"{self._scheme_suggestion(scheme)}; installed schemes: {installed}{note}"
        )

    def _failed_to_load(self, scheme: str) -> tuple[list[str], list[str]]:
        """The plugins that could not be loaded (broken or incompatible: their schemes are
        unknown, as they never registered), split into those whose entry-point or
        distribution name mentions ``scheme`` and the others."""
        related: list[str] = []
        others: list[str] = []
        for row in self._problems:
            if row.status not in ("broken", "incompatible"):
                continue
            version = f" {row.version}" if row.version else ""
            text = f"{row.name} ({row.distribution}{version}) is {row.status}: {row.error}"
            names = (row.name.lower(), canonicalize_name(row.distribution))
            mine = any(scheme in name or (name and name in scheme) for name in names)
            (related if mine else others).append(text)
        return related, others

    def _scheme_suggestion(self, scheme: str) -> str:
        from harel.store.common.urls import close_scheme

        known = set(self._state.schemes)
        known |= {item for entry in FIRST_PARTY.values() for item in entry.schemes}
        close = close_scheme(scheme, known)
        return f" (did you mean {close}://?)" if close and close != scheme else ""

    def _names_text(self) -> str:
        return ", ".join(sorted(self._state.ok)) or "none"

    def _installable_text(self) -> str:
        missing = [name for name in FIRST_PARTY if name not in self._state.ok]
        if not missing:
            return ""
        return f"; first-party backends you can install: {', '.join(missing)}"


def _dist_name(dist: importlib.metadata.Distribution | None) -> str:
    if dist is None:
        return "<unknown distribution>"
    name = dist.metadata["Name"]
    return str(name) if name else "<unknown distribution>"


def _info(claim: _Claim, status: BackendStatus, error: str | None) -> BackendInfo:
    backend = claim.backend
    return BackendInfo(
        name=backend.name,
        distribution=claim.distribution,
        version=claim.version,
        schemes=backend.schemes,
        capabilities=backend.capabilities,
        status=status,
        error=error,
        backend=backend,
        entry_point=claim.entry_point,
    )


REGISTRY = Registry()
"""The process-wide registry the module-level functions use."""
