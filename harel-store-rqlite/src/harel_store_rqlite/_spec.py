"""The rqlite backend as core's registry and URL parsing see it; imports no HTTP client.

URL forms: ``rqlite://host:4001`` (HTTP; the port defaults to 4001), ``rqlites://host:4001``
(HTTPS), ``http://`` / ``https://`` (the previous release's aliases of those two; the registry
does not claim them), ``rqlite://user:password@host`` (basic auth; the password is never
printed), a path (``rqlite://proxy/rqlite``: a prefix of every endpoint).  Knobs ride as query
parameters or keyword arguments (keywords win); ``connect_retries`` / ``retry_delay``
(``from_url`` only) wait for a node that is starting or has no leader.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from harel.store.author import BackendSpec, Knob, LegacyEnv, StoreURL, trace_max_knob
from harel.store.contract import Capabilities
from harel.store.errors import InvalidStoreURL

DISTRIBUTION = "harel-store-rqlite"
DEFAULT_PORT = 4001
DEFAULT_URL = "rqlite://localhost:4001"
FORMS = ("rqlite://host:4001 (HTTP)", "rqlites://host:4001 (HTTPS)")
LEVELS = ("none", "weak", "linearizable", "strong")
"""rqlite's read consistency levels (``linearizable`` needs rqlite 8.33 or newer)."""
LOCAL_FAKE_HOST = "local-fake"
"""The host of ``rqlite://local-fake``: the test harness's placeholder for a fake node it
starts itself (see ``harel_store_rqlite.testing``); never a store URL."""
_ALIASES = {"http": "rqlite", "https": "rqlites"}
_NODE_SCHEMES = {"rqlite": "http", "rqlites": "https"}


def _alias(url: str) -> str:
    """``http(s)://`` spelt as ``rqlite(s)://`` (a text edit: the rest is kept as written)."""
    scheme, sep, rest = url.partition("://") if isinstance(url, str) else ("", "", "")
    return f"{_ALIASES[scheme.lower()]}://{rest}" if sep and scheme.lower() in _ALIASES else url


def _node(parsed: StoreURL) -> str:
    """The node's ``http(s)://host:port[/prefix]`` (no credentials) a parsed URL names."""
    if not parsed.host:
        raise InvalidStoreURL(f"{parsed.redacted!r} names no host; use rqlite://host:4001")
    if parsed.host == LOCAL_FAKE_HOST:
        raise InvalidStoreURL(
            f"{parsed.redacted!r} is the test harness's placeholder for a fake rqlite node it "
            "starts itself (harel conformance / the test suites); point a store at a real "
            "rqlite node, e.g. rqlite://localhost:4001"
        )
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
    port = parsed.port or DEFAULT_PORT
    return f"{_NODE_SCHEMES[parsed.scheme]}://{host}:{port}{parsed.path.rstrip('/')}"


def _location(parsed: StoreURL) -> dict[str, Any]:
    """The options' node (checked now, before any retry) and the URL's credentials."""
    return {"base_url": _node(parsed), "username": parsed.username, "password": parsed.password}


SPEC = BackendSpec(
    name="rqlite",
    title="rqlite",
    schemes=("rqlite", "rqlites"),
    url_forms=FORMS,
    store="harel_store_rqlite.sync:RqliteStore",
    async_store="harel_store_rqlite.aio:AsyncRqliteStore",
    capabilities=Capabilities(
        persistent=True, multi_process=True, ordered_listing=True, exact_pages=True
    ),
    distribution=DISTRIBUTION,
    location=_location,
    normalize=_alias,
    knobs=(
        trace_max_knob(),
        Knob("timeout", float, 10.0, above=0, doc="seconds per request"),
        Knob("level", str, "strong", choices=LEVELS, doc="read consistency of every read"),
        Knob("sweep_level", str, "level", choices=(*LEVELS, "level"), doc="default: the level"),
        Knob("unified", bool, True, doc="commits on /db/request (false: rqlite < 8)"),
        Knob("verify", bool, True, doc="check the node's TLS certificate"),
        Knob("ca_file", str, None, optional=True, check=lambda v: v or None, doc="PEM CA file"),
        Knob("redirects", int, 5, minimum=0, doc="leader redirects followed per request"),
    ),
    retry=(6, 0.25),
    legacy=LegacyEnv(url_vars=("STM_RQLITE_URL",), schemes=_ALIASES),
    harness="harel_store_rqlite.testing:harness_from_url",
    local_url=f"rqlite://{LOCAL_FAKE_HOST}",
    exists="harel_store_rqlite._exists:store_exists",
    description="rqlite over its HTTP API (httpx): one request per commit, strong reads",
)
"""The backend's declaration; the ``harel.stores`` entry point names it.  ``local_url`` is not
a store URL but the placeholder on which the harness starts a local fake node per dataset
(``HAREL_TEST_RQLITE_URL`` points the tests at a real node instead)."""
CAPABILITIES = SPEC.capabilities
"""Raft-replicated and on disk, shared by every process that reaches the cluster, keyset
listing by id, exact pages."""


@dataclass(frozen=True, slots=True)
class RqliteOptions:
    """Validated settings of one store (build it with :func:`make_options`; ``repr`` never
    shows the password)."""

    base_url: str
    """``http(s)://host:port[/prefix]``, without credentials."""
    username: str | None
    password: str | None = field(repr=False)
    trace_max: int | None
    timeout: float
    level: str
    sweep_level: str
    unified: bool
    verify: bool
    ca_file: str | None
    redirects: int

    @property
    def where(self) -> str:
        """The node as named in messages (no credentials)."""
        return f"rqlite node {self.base_url}"

    @property
    def auth(self) -> tuple[str, str] | None:
        """HTTP basic auth credentials, if the URL had a user."""
        return None if self.username is None else (self.username, self.password or "")

    def tls(self) -> ssl.SSLContext | bool:
        """httpx's ``verify``: ``False`` for plain HTTP or ``verify=false``, else a verifying
        context (trusting ``ca_file`` when given) shared by the stores of this process."""
        if not self.verify or not self.base_url.startswith("https:"):
            return False
        return _tls_context(self.ca_file)


@lru_cache(maxsize=8)
def _tls_context(ca_file: str | None) -> ssl.SSLContext:
    """A verifying client context: the system's CAs, or those of ``ca_file``."""
    return ssl.create_default_context(cafile=ca_file)


def make_options(url: str, **knobs: Any) -> RqliteOptions:
    """The settings of the node ``url`` names with its knobs and ``knobs`` (keywords win),
    each checked against :data:`SPEC` (``InvalidStoreURL`` / ``InvalidStoreOption``)."""
    parsed, url_knobs, _retry = SPEC.parse_url(url)
    return _options({**_location(parsed), **SPEC.knob_values({**url_knobs, **knobs})})


def open_options(url: str, knobs: dict[str, Any]) -> tuple[RqliteOptions, dict[str, Any]]:
    """``from_url``'s settings, the URL parsed once (as :func:`make_options`, and
    ``connect_retries`` / ``retry_delay`` also as keywords), and the keyword arguments of
    ``connect_with_retry``."""
    arguments, retry = SPEC.open_args(url, knobs)
    return _options(arguments), retry


def _options(values: dict[str, Any]) -> RqliteOptions:
    if values["sweep_level"] == "level":  # optional=True would read the level "none" as None
        values["sweep_level"] = values["level"]
    return RqliteOptions(**values)
