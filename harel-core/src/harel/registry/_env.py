"""``store_from_env()``: the store named by ``STM_STORE_BACKEND``/``STM_STORE_URL``.

The legacy per-backend variables of the upstream worker (``STM_STORE_DB``,
``STM_POSTGRES_DSN``, ...) still work when ``STM_STORE_URL`` is not set.  Settings are read
at call time, never at import time.  Trace settings are applied by the caller.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, overload
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

from harel.registry._core import REGISTRY
from harel.registry._firstparty import FIRST_PARTY
from harel.registry._select import open_async_store, open_store
from harel.store.common.urls import parse_store_url, redact_url
from harel.store.contract import AsyncExecutionStore, ExecutionStore
from harel.store.errors import BackendError, StoreConfigError, UnknownBackend

BACKEND_VAR = "STM_STORE_BACKEND"
URL_VAR = "STM_STORE_URL"
DEFAULT_BACKEND = "sqlite"


@dataclass(frozen=True)
class StoreSettings:
    """Which store the environment selects: backend name, URL and extra ``from_url`` knobs.

    ``source`` names the variable the URL came from.  The repr hides passwords and knobs.
    """

    backend: str
    url: str
    knobs: dict[str, Any] = field(default_factory=dict, repr=False)
    source: str = URL_VAR

    def __repr__(self) -> str:
        return (
            f"StoreSettings(backend={self.backend!r}, url={redact_url(self.url)!r}, "
            f"knobs={sorted(self.knobs)!r}, source={self.source!r})"
        )


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    if value is None or not value.strip():
        return None
    return value.strip()


def _require(env: Mapping[str, str], name: str, backend: str, example: str) -> str:
    value = _get(env, name)
    if value is None:
        raise StoreConfigError(
            f"{name} is not set: the {backend} store needs it (or set {URL_VAR}, e.g. "
            f"{URL_VAR}={example})"
        )
    return value


_Legacy = tuple[str, dict[str, Any], str]


def _sqlite(env: Mapping[str, str]) -> _Legacy:
    path = _require(env, "STM_STORE_DB", "sqlite", "sqlite:///app.db")
    return f"sqlite:///{quote(path, safe='/:')}", {}, "STM_STORE_DB"


def _memory(env: Mapping[str, str]) -> _Legacy:
    return "memory://", {}, "(default)"


def _redis(env: Mapping[str, str]) -> _Legacy:
    for name in ("STM_STORE_REDIS_URL", "STM_REDIS_URL"):
        value = _get(env, name)
        if value is not None:
            return value, {}, name
    raise StoreConfigError(
        "STM_STORE_REDIS_URL (or STM_REDIS_URL) is not set: the redis store needs it "
        f"(or set {URL_VAR}, e.g. {URL_VAR}=redis://localhost:6379/0)"
    )


_LIBPQ_PAIR = re.compile(r"\s*(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)")


def libpq_dsn_to_url(dsn: str) -> str:
    """A ``postgresql://`` URL for a libpq ``key=value`` DSN (a URL is returned unchanged)."""
    if "://" in dsn:
        return dsn
    params: dict[str, str] = {}
    position = 0
    while position < len(dsn.rstrip()):
        match = _LIBPQ_PAIR.match(dsn, position)
        if match is None or match.end() == position:
            raise StoreConfigError(
                "STM_POSTGRES_DSN is neither a postgresql:// URL nor a libpq 'key=value' DSN"
            )
        raw = match.group(2)
        if raw.startswith("'"):
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        params[match.group(1)] = raw
        position = match.end()
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", None)
    host = params.pop("host", "")
    if ":" in host:
        host = f"[{host}]"
    port = params.pop("port", "")
    netloc = user
    if password is not None:
        netloc += ":" + quote(password, safe="")
    if netloc:
        netloc += "@"
    netloc += quote(host, safe="[]:") + (f":{port}" if port else "")
    path = "/" + quote(params.pop("dbname", ""), safe="")
    return urlunsplit(("postgresql", netloc, path, urlencode(params), ""))


def _postgres(env: Mapping[str, str]) -> _Legacy:
    dsn = _require(env, "STM_POSTGRES_DSN", "postgres", "postgresql://user@localhost/harel")
    return libpq_dsn_to_url(dsn), {}, "STM_POSTGRES_DSN"


def _rqlite(env: Mapping[str, str]) -> _Legacy:
    value = _require(env, "STM_RQLITE_URL", "rqlite", "rqlite://localhost:4001")
    parts = urlsplit(value)
    scheme = {"http": "rqlite", "https": "rqlites"}.get(parts.scheme.lower())
    if scheme is not None:
        value = urlunsplit(parts._replace(scheme=scheme))
    return value, {}, "STM_RQLITE_URL"


def _mongo(env: Mapping[str, str]) -> _Legacy:
    value = _require(env, "STM_MONGO_URL", "mongo", "mongodb://localhost:27017")
    knobs: dict[str, Any] = {}
    db_name = _get(env, "STM_MONGO_DB")
    if db_name is not None:
        knobs["db_name"] = db_name
    return value, knobs, "STM_MONGO_URL"


def _libsql(env: Mapping[str, str]) -> _Legacy:
    value = _require(env, "STM_LIBSQL_DB", "libsql", "libsql+file:///app.db")
    url = value if "://" in value else f"libsql+file:///{quote(value, safe='/:')}"
    knobs: dict[str, Any] = {}
    sync_url = _get(env, "STM_LIBSQL_SYNC_URL")
    if sync_url is not None:
        knobs["sync_url"] = sync_url
    token = env.get("STM_LIBSQL_AUTH_TOKEN")
    if token:
        knobs["auth_token"] = token
    return url, knobs, "STM_LIBSQL_DB"


def _dynamodb(env: Mapping[str, str]) -> _Legacy:
    region = _get(env, "STM_AWS_REGION") or "us-east-1"
    endpoint = _get(env, "STM_DYNAMODB_ENDPOINT")
    query = urlencode({"endpoint": endpoint}) if endpoint else ""
    source = "STM_DYNAMODB_ENDPOINT" if endpoint else "STM_AWS_REGION"
    return urlunsplit(("dynamodb", quote(region, safe=""), "", query, "")), {}, source


LEGACY: dict[str, Callable[[Mapping[str, str]], _Legacy]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "libsql": _libsql,
    "redis": _redis,
    "postgres": _postgres,
    "rqlite": _rqlite,
    "mongo": _mongo,
    "dynamodb": _dynamodb,
}
"""Backend name -> how its upstream variables become a URL (used without ``STM_STORE_URL``)."""


def _known_names() -> list[str]:
    return sorted(set(REGISTRY.backends()) | set(FIRST_PARTY))


def _schemes_of(name: str) -> tuple[str, ...] | None:
    try:
        return REGISTRY.get(name).schemes
    except BackendError:
        known = FIRST_PARTY.get(name)
        return None if known is None else known.schemes


def store_settings_from_env(environ: Mapping[str, str] | None = None) -> StoreSettings:
    """Read ``STM_STORE_BACKEND``/``STM_STORE_URL`` (and the legacy variables) into settings.

    Raises StoreConfigError naming a missing variable or a backend/URL mismatch,
    UnknownBackend naming an unknown backend and the known ones, InvalidStoreURL for a
    malformed URL.  No store is opened.
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
            return StoreSettings(REGISTRY.for_url(url).name, url, {}, URL_VAR)
        schemes = _schemes_of(name) or ()
        if parsed.scheme not in schemes:
            raise StoreConfigError(
                f"{BACKEND_VAR}={name} does not match {URL_VAR}={parsed.redacted}: the {name} "
                f"backend handles {', '.join(s + '://' for s in schemes)} URLs; make them agree "
                f"or unset {BACKEND_VAR}"
            )
        return StoreSettings(name, url, {}, URL_VAR)
    name = name or DEFAULT_BACKEND
    legacy = LEGACY.get(name)
    if legacy is None:
        raise StoreConfigError(
            f"{URL_VAR} is not set: the {name} backend has no legacy variables, so set "
            f"{URL_VAR} to its store URL"
        )
    legacy_url, knobs, source = legacy(env)
    parse_store_url(legacy_url)
    return StoreSettings(name, legacy_url, knobs, source)


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
        return open_async_store(settings.url, **settings.knobs)
    return open_store(settings.url, **settings.knobs)
