"""The declarative backend spec: what a backend declares once, and what core derives from it.

A backend's ``_spec.py`` holds one :class:`BackendSpec` named ``SPEC``: its schemes and URL
shape, its knobs (:class:`Knob`: type, default, bounds or choices, secret — each written once),
its legacy environment variables (:class:`LegacyEnv`), capabilities, harness and description.
Core derives from it:

* URL and keyword parsing with one set of messages (``did you mean`` for a misspelt knob):
  :meth:`BackendSpec.open_args` for ``from_url``, :meth:`BackendSpec.knob_values` for a
  constructor's keywords;
* ``from_url`` on every store base (:class:`FromUrl`, :class:`AsyncFromUrl`);
* registration: ``SPEC`` is the plugin the ``harel.stores`` entry point names (it implements
  ``harel_register_stores``), and :meth:`BackendSpec.backend` is the registry's row;
* the legacy variables' URL (:meth:`LegacyEnv.url`).

Importing this module (and so a backend's ``_spec.py``) imports no driver.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, Self
from urllib.parse import quote, urlencode

from harel.registry._descriptor import StoreBackend, hookimpl
from harel.store.common.retry import (
    aconnect_with_retry,
    connect_with_retry,
    retry_arguments,
    retry_knobs,
)
from harel.store.common.urls import (
    HIDDEN,
    StoreURL,
    is_secret_key,
    option_suggestions,
    parse_store_url,
)
from harel.store.contract import DEFAULT_TRACE_MAX, Capabilities
from harel.store.errors import InvalidStoreOption, InvalidStoreURL, PluginError, StoreConfigError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_KINDS: dict[type, str] = {int: "an int", float: "a number", bool: "true or false", str: "a string"}
RETRY_KNOBS = ("connect_retries", "retry_delay")
"""The two knobs every ``from_url`` takes to retry an open that finds the server unreachable."""


@dataclass(frozen=True)
class Knob:
    """One store option, declared once: name, type, default, bounds or choices, whether secret.

    A knob arrives as URL query text (:meth:`from_text`) or as a keyword value
    (:meth:`validate`); both give the same typed value or the same
    :class:`~harel.store.errors.InvalidStoreOption` naming the knob (a secret's value is never
    shown).  ``optional``: ``None`` is accepted from keywords (and ``none`` from a URL).
    ``above`` is an exclusive minimum (``> 0``).  A choice knob takes ``True``/``False`` as the
    choices ``true``/``false``.  ``aliases`` are other spellings of the name (``authToken``).
    ``check`` runs last on the typed value (a backend rule, e.g. a schema name) and returns it.
    """

    name: str
    kind: type
    default: Any
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    optional: bool = False
    secret: bool = False
    check: Callable[[Any], Any] | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise PluginError(f"knob {self.name!r}: kind must be int, float, bool or str")
        if self.secret and not is_secret_key(self.name):
            raise PluginError(
                f"knob {self.name!r} is secret but its name does not look secret, so a URL "
                "carrying it would not be redacted: give it a name with token/secret/password/key"
            )

    def requirement(self) -> str:
        """What a value must be, as error messages say it."""
        if self.choices:
            text = f"one of {', '.join(self.choices)}"
        else:
            text = _KINDS[self.kind]
            if self.minimum is not None:
                text += f" >= {self.minimum:g}"
            if self.above is not None:
                text += f" > {self.above:g}"
            if self.maximum is not None:
                text += f" <= {self.maximum:g}"
        return text + (" or None" if self.optional else "")

    def _refuse(self, value: object) -> InvalidStoreOption:
        shown = HIDDEN if self.secret or is_secret_key(self.name) else repr(value)
        return InvalidStoreOption(f"option {self.name}={shown} must be {self.requirement()}")

    def from_text(self, text: str) -> Any:
        """The typed value of URL query text ``text``."""
        if self.optional and text.strip().lower() == "none":
            return None
        value: Any = text
        try:
            if self.kind is bool:
                lowered = text.strip().lower()
                if lowered not in _TRUE | _FALSE:
                    raise ValueError(text)
                value = lowered in _TRUE
            elif self.kind is int:
                value = int(text)
            elif self.kind is float:
                value = float(text)
        except ValueError:
            raise self._refuse(text) from None
        return self.validate(value)

    def validate(self, value: object) -> Any:
        """``value`` checked (and a choice normalised to its declared spelling)."""
        if value is None and self.optional:
            return None
        if self.choices:
            if isinstance(value, bool):
                value = "true" if value else "false"
            found = {choice.upper(): choice for choice in self.choices}
            if not isinstance(value, str) or value.strip().upper() not in found:
                raise self._refuse(value)
            value = found[value.strip().upper()]
        elif not _is_kind(value, self.kind):
            raise self._refuse(value)
        elif self.kind in (int, float):
            number: float = value  # type: ignore[assignment]
            if (
                not math.isfinite(number)
                or (self.minimum is not None and number < self.minimum)
                or (self.maximum is not None and number > self.maximum)
                or (self.above is not None and number <= self.above)
            ):
                raise self._refuse(value)
            value = float(number) if self.kind is float else number
        return value if self.check is None else self.check(value)


def _is_kind(value: object, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def trace_max_knob(default: int | None = DEFAULT_TRACE_MAX) -> Knob:
    """The ``trace_max`` knob every backend has: trace steps kept per execution (0 or None: no
    limit)."""
    return Knob("trace_max", int, default, minimum=0, optional=True, doc="trace steps kept")


def memory_alias(scheme: str) -> Callable[[str], str]:
    """A ``normalize`` for :class:`BackendSpec`: ``scheme://:memory:`` (the spelling users
    write) read as ``scheme:///:memory:`` (the file ``:memory:``), query kept; anything else,
    non-text included, passes unchanged."""
    alias = f"{scheme}://:memory:"

    def normalize(url: str) -> str:
        if isinstance(url, str) and url.split("?", 1)[0].lower() == alias:
            return f"{scheme}:///:memory:{url[len(alias) :]}"
        return url

    return normalize


@dataclass(frozen=True)
class LegacyEnv:
    """A backend's legacy environment variables as data.

    The URL is the first of ``url_vars`` that is set (its scheme renamed through ``schemes``,
    e.g. ``http`` to ``rqlite``), else ``template`` filled with the percent-encoded value of
    ``path_var`` (``"sqlite:///{}"``); each of ``knob_vars`` (variable to knob name) that is set
    rides in the URL's query.  A knob variable without a URL variable raises
    :class:`~harel.store.errors.StoreConfigError` naming both.
    """

    url_vars: tuple[str, ...] = ()
    path_var: str | None = None
    template: str = "{}"
    schemes: Mapping[str, str] = field(default_factory=dict)
    knob_vars: Mapping[str, str] = field(default_factory=dict)

    @property
    def variables(self) -> tuple[str, ...]:
        """Every variable read, in the order they are looked at."""
        path = () if self.path_var is None else (self.path_var,)
        return (*self.url_vars, *path, *self.knob_vars)

    def url(self, env: Mapping[str, str]) -> str | None:
        """The store URL the variables in ``env`` name, or ``None`` when none is set."""
        values = {
            name: env[name].strip() for name in self.variables if (env.get(name) or "").strip()
        }
        url = next((values[name] for name in self.url_vars if name in values), None)
        if url is None and self.path_var in values:
            url = self.template.format(quote(values[self.path_var], safe="/:"))
        knobs = {knob: values[name] for name, knob in self.knob_vars.items() if name in values}
        if url is None:
            if knobs:
                wanted = " or ".join(self.url_vars or (self.path_var or "",))
                raise StoreConfigError(
                    f"{', '.join(name for name in self.knob_vars if name in values)} is set but "
                    f"{wanted} is not: set {wanted} (or STM_STORE_URL) to name the store"
                )
            return None
        scheme, sep, rest = url.partition("://")
        if sep and scheme.lower() in self.schemes:  # text edits: urlunsplit would drop "//"
            url = f"{self.schemes[scheme.lower()]}://{rest}"
        if knobs:
            url += ("&" if "?" in url else "?") + urlencode(knobs)
        return url


class OpenArgs(NamedTuple):
    """What ``from_url`` needs: the constructor's keyword arguments and the retry's."""

    arguments: dict[str, Any]
    retry: dict[str, Any]


@dataclass(frozen=True, eq=False)
class BackendSpec:
    """Everything a backend declares, once; the plugin object its entry point names.

    ``location`` reads the URL's shape (everything but the knobs: a path, hosts, a database)
    into constructor arguments, raising :class:`~harel.store.errors.InvalidStoreURL` for a URL
    of the wrong shape; ``passthrough`` lists query parameters handed to the driver untouched
    (delivered to ``location`` in ``StoreURL.query``).  ``url_forms`` are the URL examples
    messages show.  ``legacy`` (data) or ``legacy_env`` (an import string of a function, for
    variables data cannot describe) builds a URL from the legacy variables.  ``store`` /
    ``async_store`` / ``harness`` / ``exists`` are import strings; ``retry`` the default
    ``(connect_retries, retry_delay)`` of ``from_url`` (``retry_for``, when given, picks it from
    the URL and the knobs' values: a server is retried, a file is not).  ``legacy_vars`` names
    the variables a ``legacy_env`` function reads (``harel stores`` shows them).  ``check``
    runs on every knob's value together (a rule across knobs, e.g. ``pool_max >= pool_min``)
    and raises :class:`~harel.store.errors.InvalidStoreOption`.  ``parser`` reads URL text into a
    :class:`StoreURL` (a backend whose URLs the standard form cannot hold, e.g. several hosts);
    ``passthrough_any``: every query parameter that is not a knob goes to the driver.
    """

    name: str
    title: str
    schemes: tuple[str, ...]
    url_forms: tuple[str, ...]
    store: str
    async_store: str
    capabilities: Capabilities
    distribution: str
    location: Callable[[StoreURL], dict[str, Any]]
    knobs: tuple[Knob, ...] = ()
    passthrough: frozenset[str] = frozenset()
    passthrough_any: bool = False
    retry: tuple[int, float] = (0, 0.5)
    retry_for: Callable[[StoreURL, dict[str, Any]], tuple[int, float]] | None = None
    legacy: LegacyEnv | None = None
    legacy_env: str | None = None
    legacy_vars: tuple[str, ...] = ()
    check: Callable[[dict[str, Any]], None] | None = None
    parser: Callable[[str], StoreURL] = parse_store_url
    harness: str | None = None
    local_url: str | None = None
    exists: str | None = None
    description: str = ""
    normalize: Callable[[str], str] | None = None
    """Rewrites an alias spelling of a URL before it is parsed (``sqlite://:memory:``)."""
    by_name: dict[str, Knob] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        names = [name for knob in self.knobs for name in (knob.name, *knob.aliases)]
        clash = sorted(
            {name for name in names if names.count(name) > 1} | set(RETRY_KNOBS) & set(names)
        )
        if clash:
            raise PluginError(f"backend {self.name!r}: knob(s) {', '.join(clash)} declared twice")
        by_name = {name: knob for knob in self.knobs for name in (knob.name, *knob.aliases)}
        object.__setattr__(self, "by_name", by_name)

    @property
    def defaults(self) -> dict[str, Any]:
        """Every knob's default."""
        return {knob.name: knob.default for knob in self.knobs}

    def _canonical(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """``given`` keyed by knob names (aliases renamed); a knob given twice is refused."""
        named: dict[str, Any] = {}
        for name, value in given.items():
            knob = self.by_name[name].name
            if knob in named:
                raise InvalidStoreOption(f"option {knob} is given twice (as {name} and {knob})")
            named[knob] = value
        return named

    def _unknown(self, names: list[str], allowed: set[str]) -> InvalidStoreOption:
        return InvalidStoreOption(
            f"unknown option(s) {', '.join(names)} for a {self.title} store"
            f"{option_suggestions(names, allowed)}; allowed: {', '.join(sorted(allowed))}"
        )

    def knob_values(self, keywords: Mapping[str, Any]) -> dict[str, Any]:
        """Every knob's value: the keyword's (validated) or the default; an unknown keyword
        raises :class:`~harel.store.errors.InvalidStoreOption` (did you mean ...)."""
        unknown = sorted(set(keywords) - set(self.by_name))
        if unknown:
            raise self._unknown(unknown, set(self.by_name))
        return self._completed({}, self._canonical(keywords))

    def _completed(self, checked: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
        """Every knob's value: ``given``'s (keyed by knob names, validated here), else
        ``checked``'s (validated already: a URL's), else the default; then the rule across
        knobs.  Each value is validated exactly once."""
        values = {**self.defaults, **checked}
        values.update((name, self.by_name[name].validate(value)) for name, value in given.items())
        if self.check is not None:
            self.check(values)
        return values

    def parse_url(self, url: str) -> tuple[StoreURL, dict[str, Any], dict[str, Any]]:
        """The parsed URL (its query holding only the ``passthrough`` parameters), the typed
        store knobs and the typed retry knobs it carries; a wrong scheme or an unknown or
        malformed knob raises :class:`~harel.store.errors.InvalidStoreURL`."""
        parsed = self.parser(url if self.normalize is None else self.normalize(url))
        if parsed.scheme not in self.schemes:
            forms = " or ".join(self.url_forms)
            raise InvalidStoreURL(
                f"{parsed.redacted!r} is not a {self.schemes[0]}:// URL; use {forms}"
            )
        allowed = set(self.by_name) | set(RETRY_KNOBS) | set(self.passthrough)
        unknown = sorted(set(parsed.query) - allowed)
        if unknown and not self.passthrough_any:
            raise self._unknown(unknown, allowed)
        knobs = self._canonical(
            {
                name: self.by_name[name].from_text(text)
                for name, text in parsed.query.items()
                if name in self.by_name
            }
        )
        passed = {
            name: text
            for name, text in parsed.query.items()
            if name not in self.by_name and name not in RETRY_KNOBS
        }
        return parsed.with_query(passed), knobs, retry_knobs(parsed.query)

    def open_args(self, url: str, keywords: Mapping[str, Any]) -> OpenArgs:
        """``from_url``'s work: the URL's location and knobs with ``keywords`` winning, every
        knob validated once (a URL's by :meth:`parse_url`, a keyword's here), and the retry
        arguments of ``connect_with_retry``."""
        parsed, knobs, retry = self.parse_url(url)
        unknown = sorted(set(keywords) - set(self.by_name) - set(RETRY_KNOBS))
        if unknown:
            raise self._unknown(unknown, set(self.by_name) | set(RETRY_KNOBS))
        given: dict[str, Any] = {}
        for name, value in keywords.items():
            if name in RETRY_KNOBS:
                retry[name] = value
            else:
                given[self.by_name[name].name] = value
        arguments = {**self.location(parsed), **self._completed(knobs, given)}
        retries, delay = self.retry if self.retry_for is None else self.retry_for(parsed, arguments)
        return OpenArgs(
            arguments,
            retry_arguments(
                retry, what=parsed.redacted, default_retries=retries, default_delay=delay
            ),
        )

    def legacy_url(self, env: Mapping[str, str]) -> str | None:
        """The URL the legacy variables (data) name; ``None`` when none is set."""
        return None if self.legacy is None else self.legacy.url(env)

    def backend(self) -> StoreBackend:
        """The registry's description of this backend."""
        module = self.store.partition(":")[0].rpartition(".")[0]
        legacy_env = self.legacy_env
        if legacy_env is None and self.legacy is not None:
            legacy_env = f"{module}._spec:SPEC.legacy_url"
        variables = self.legacy.variables if self.legacy is not None else self.legacy_vars
        return StoreBackend(
            name=self.name,
            schemes=self.schemes,
            store=self.store,
            async_store=self.async_store,
            capabilities=self.capabilities,
            distribution=self.distribution,
            harness=self.harness,
            description=self.description,
            local_url=self.local_url,
            legacy_env=legacy_env,
            legacy_vars=variables,
            exists=self.exists,
        )

    @hookimpl
    def harel_register_stores(self, register: Callable[[StoreBackend], None]) -> None:
        """Register this backend (the spec is the plugin its entry point names)."""
        register(self.backend())


class FromUrl:
    """``from_url`` for a sync store base whose constructor takes the spec's arguments."""

    spec: ClassVar[BackendSpec]

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open the store ``url`` names (keyword knobs win over the URL's); ``connect_retries``
        / ``retry_delay`` retry an open that finds the server unreachable."""
        arguments, retry = cls.spec.open_args(url, knobs)
        return connect_with_retry(lambda: cls(**arguments), **retry)


class AsyncFromUrl:
    """``from_url`` for an async store base whose ``open`` takes the spec's arguments."""

    spec: ClassVar[BackendSpec]

    @classmethod
    async def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open the store ``url`` names, as :meth:`FromUrl.from_url`."""
        arguments, retry = cls.spec.open_args(url, knobs)
        opener: Callable[..., Awaitable[Self]] = cls.open  # type: ignore[attr-defined]
        return await aconnect_with_retry(lambda: opener(**arguments), **retry)
