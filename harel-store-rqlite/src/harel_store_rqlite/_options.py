"""Store options: ``rqlite://`` / ``rqlites://`` URL parsing, knobs and their validation.

URL forms:

* ``rqlite://host:4001`` — plain HTTP (the port defaults to 4001, rqlite's HTTP port);
* ``rqlites://host:4001`` — HTTPS;
* ``http://host:4001`` / ``https://host:4001`` — aliases of ``rqlite://`` / ``rqlites://`` (the
  URLs the previous release took; ``from_url`` and the constructor accept them, the registry
  does not claim the ``http`` schemes);
* ``rqlite://user:password@host:4001`` — HTTP basic auth (percent-encode ``/ ? # @ :`` in the
  password); the password is never printed (reprs and errors show ``user:***@``);
* a path (``rqlite://proxy/rqlite``) is kept as a prefix of every endpoint (a node behind a
  reverse proxy).

Knobs ride as query parameters (``?level=linearizable&timeout=5``) or keyword arguments
(which win over the URL's): see :class:`RqliteKnobs`.  ``connect_retries`` / ``retry_delay``
(``from_url`` only, query or keywords, validated by harel-core's ``retry_arguments``) shape
the wait for a node that is starting or has no leader.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, TypedDict
from urllib.parse import unquote_plus

from harel.store.common import parse_store_url, retry_arguments
from harel.store.common.retry import RETRY_KNOBS, retry_knobs
from harel.store.common.urls import knob_bool, knob_choice, knob_float, knob_int
from harel.store.contract import DEFAULT_TRACE_MAX
from harel.store.errors import InvalidStoreURL

SCHEMES = {"rqlite": "http", "rqlites": "https", "http": "http", "https": "https"}
"""URL scheme -> the node's HTTP scheme (``http(s)://`` are the previous release's aliases)."""
DEFAULT_PORT = 4001
DEFAULT_URL = "rqlite://localhost:4001"
LEVELS = ("none", "weak", "linearizable", "strong")
"""rqlite's read consistency levels (``linearizable`` needs rqlite 8.33 or newer)."""
DEFAULT_TIMEOUT = 10.0
DEFAULT_CONNECT_RETRIES = 6
DEFAULT_RETRY_DELAY = 0.25
LOCAL_FAKE_HOST = "local-fake"
"""The host of ``rqlite://local-fake``: the test harness's placeholder for a fake node it
starts itself (see ``harel_store_rqlite.testing``); never a store URL."""

KNOBS = frozenset(
    {"trace_max", "timeout", "level", "sweep_level", "unified", "verify", "ca_file", "redirects"}
)
"""Options accepted in a URL's query or as keyword arguments."""
CONNECT_KNOBS = RETRY_KNOBS
"""Options of ``from_url`` (URL query or keywords) that shape the open itself."""
_retry_arguments = partial(
    retry_arguments, default_retries=DEFAULT_CONNECT_RETRIES, default_delay=DEFAULT_RETRY_DELAY
)
"""``retry_arguments`` with this backend's defaults (``connect_retries=6``,
``retry_delay=0.25``)."""


class RqliteKnobs(TypedDict, total=False):
    """The keyword knobs of ``RqliteStore`` / ``AsyncRqliteStore.open``.

    * ``trace_max`` — trace steps kept per execution (0 or ``None``: no limit; default 200);
    * ``timeout`` — seconds one HTTP request may take (connect, send, wait; default 10);
    * ``level`` — read consistency of every read (``none``, ``weak``, ``linearizable``,
      ``strong``; default ``strong``: each read goes through the Raft log, so it sees every
      write acknowledged before it);
    * ``sweep_level`` — read consistency of relay polls, timer sweeps and listing (default: the
      ``level``); ``weak`` is safe there: a stale sweep only repeats an item that the CAS,
      the dedupe mark or ``delete_timer``'s exact-match guard turns into a no-op;
    * ``unified`` — send commits and purges to the unified ``/db/request`` endpoint so that a
      lost CAS's stored version (and purge's status check) come back in the same request
      (default true; ``false`` for servers older than rqlite 8, which then take a second
      request on a conflict or a refused purge);
    * ``verify`` — check the server's TLS certificate (``rqlites://``; default true);
    * ``ca_file`` — a PEM bundle of the CA that signed the node's certificate;
    * ``redirects`` — leader redirects (301/302/307/308) followed per request (default 5).
    """

    trace_max: int | None
    timeout: float
    level: str
    sweep_level: str
    unified: bool
    verify: bool
    ca_file: str | None
    redirects: int


@dataclass(frozen=True, slots=True)
class RqliteOptions:
    """Validated settings of one store (``repr`` never shows the password)."""

    base_url: str
    """``http(s)://host:port[/prefix]``, without credentials."""
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    trace_max: int | None = DEFAULT_TRACE_MAX
    timeout: float = DEFAULT_TIMEOUT
    level: str = "strong"
    sweep_level: str = "strong"
    unified: bool = True
    verify: bool = True
    ca_file: str | None = None
    redirects: int = 5

    @property
    def where(self) -> str:
        """The node as named in messages (no credentials)."""
        return f"rqlite node {self.base_url}"

    @property
    def auth(self) -> tuple[str, str] | None:
        """HTTP basic auth credentials, if the URL had a user."""
        if self.username is None:
            return None
        return (self.username, self.password or "")

    def tls(self) -> ssl.SSLContext | bool:
        """httpx's ``verify``: ``False`` for plain HTTP (no TLS to set up) or ``verify=false``,
        else a verifying context (trusting ``ca_file`` when given) shared by the stores of
        this process (building one costs tens of milliseconds)."""
        if not self.verify or not self.base_url.startswith("https:"):
            return False
        return _tls_context(self.ca_file)


@lru_cache(maxsize=8)
def _tls_context(ca_file: str | None) -> ssl.SSLContext:
    """A verifying client context: the system's CAs, or those of ``ca_file``."""
    return ssl.create_default_context(cafile=ca_file)


def make_options(url: str, **knobs: Any) -> RqliteOptions:
    """Options from a store URL plus keyword knobs (keywords win); ``InvalidStoreURL`` for a
    bad URL or URL knob, ``TypeError``/``ValueError`` naming a bad keyword."""
    unknown = sorted(set(knobs) - KNOBS)
    if unknown:
        raise TypeError(f"unknown rqlite store option(s): {', '.join(unknown)}")
    parsed = parse_store_url(url)
    scheme = SCHEMES.get(parsed.scheme)
    if scheme is None:
        raise InvalidStoreURL(
            f"{parsed.redacted!r} is not an rqlite URL; use rqlite://host:4001 (HTTP) or "
            "rqlites://host:4001 (HTTPS)"
        )
    if not parsed.host:
        raise InvalidStoreURL(f"{parsed.redacted!r} names no host; use rqlite://host:4001")
    if parsed.host == LOCAL_FAKE_HOST:
        raise InvalidStoreURL(
            f"{parsed.redacted!r} is the test harness's placeholder for a fake rqlite node it "
            "starts itself (harel conformance / the test suites); point a store at a real "
            "rqlite node, e.g. rqlite://localhost:4001"
        )
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
    prefix = parsed.path.rstrip("/")
    base_url = f"{scheme}://{host}:{parsed.port or DEFAULT_PORT}{prefix}"
    values = {**_url_knobs(parsed.knobs(KNOBS)), **knobs}
    level = _choice("level", values.get("level", "strong"))
    return RqliteOptions(
        base_url=base_url,
        username=parsed.username,
        password=parsed.password,
        trace_max=_trace_max(values.get("trace_max", DEFAULT_TRACE_MAX)),
        timeout=_positive("timeout", values.get("timeout", DEFAULT_TIMEOUT)),
        level=level,
        sweep_level=_choice("sweep_level", values.get("sweep_level", level)),
        unified=_flag("unified", values.get("unified", True)),
        verify=_flag("verify", values.get("verify", True)),
        ca_file=_optional_str("ca_file", values.get("ca_file")),
        redirects=_count("redirects", values.get("redirects", 5)),
    )


def _url_knobs(query: dict[str, str]) -> dict[str, Any]:
    knobs: dict[str, Any] = {}
    if "trace_max" in query:
        knobs["trace_max"] = knob_int(query, "trace_max", DEFAULT_TRACE_MAX, minimum=0)
    if "timeout" in query:
        knobs["timeout"] = knob_float(query, "timeout", DEFAULT_TIMEOUT, minimum=0.001)
    for name in ("level", "sweep_level"):
        if name in query:
            knobs[name] = knob_choice(query, name, "strong", LEVELS).lower()
    for name in ("unified", "verify"):
        if name in query:
            knobs[name] = knob_bool(query, name, True)
    if "ca_file" in query:
        knobs["ca_file"] = query["ca_file"] or None
    if "redirects" in query:
        knobs["redirects"] = knob_int(query, "redirects", 5, minimum=0)
    return knobs


def _trace_max(value: Any) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"trace_max must be an int >= 0 or None, got {value!r}")
    return value


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def _choice(name: str, value: Any) -> str:
    if not isinstance(value, str) or value.lower() not in LEVELS:
        raise ValueError(f"{name} must be one of {', '.join(LEVELS)}, got {value!r}")
    return value.lower()


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def _optional_str(name: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise TypeError(f"{name} must be a non-empty str or None, got {value!r}")
    return value


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return value


def from_url_args(url: str, knobs: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(url, store knobs, retry arguments)`` for ``from_url``.

    Unknown keyword knobs raise :class:`InvalidStoreURL` naming them; the URL is validated
    here (before any retry) and returned without its ``connect_retries`` / ``retry_delay``
    (which only shape this open); the retry arguments are those of ``connect_with_retry`` from
    harel-core's ``retry_arguments`` (a bad value raises ``ValueError`` naming the knob): retry
    while the node is unreachable or has no leader (``StoreUnavailable``).
    """
    unknown = sorted(set(knobs) - KNOBS - CONNECT_KNOBS)
    if unknown:
        raise InvalidStoreURL(
            f"unknown option(s) {', '.join(unknown)} for an rqlite store; "
            f"allowed: {', '.join(sorted(KNOBS | CONNECT_KNOBS))}"
        )
    store_knobs = {k: v for k, v in knobs.items() if k in KNOBS}
    url_connect = retry_knobs(parse_store_url(url).query)
    if url_connect:
        url = _without_query_knobs(url, CONNECT_KNOBS)
    options = make_options(url, **store_knobs)
    connect = {**url_connect, **{k: v for k, v in knobs.items() if k in CONNECT_KNOBS}}
    return url, store_knobs, _retry_arguments(connect, what=options.where)


def _without_query_knobs(url: str, names: frozenset[str]) -> str:
    """``url`` without the query parameters ``names``, everything else kept as written (the
    URL was parsed already, so its query starts at the first ``?``)."""
    base, _, rest = url.partition("?")
    query, hash_sign, fragment = rest.partition("#")
    kept = [pair for pair in query.split("&") if unquote_plus(pair.partition("=")[0]) not in names]
    kept = [pair for pair in kept if pair]
    return base + ("?" + "&".join(kept) if kept else "") + hash_sign + fragment
