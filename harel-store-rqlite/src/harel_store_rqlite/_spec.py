"""The rqlite backend as core's registry and URL parsing see it; imports no HTTP client.

URL forms: ``rqlite://host:4001`` (HTTP; the port defaults to 4001), ``rqlites://host:4001``
(HTTPS), ``http://`` / ``https://`` (the previous release's aliases of those two; the registry
does not claim them), ``rqlite://user:password@host`` (basic auth; the password is never
printed), a path (``rqlite://proxy/rqlite``: a prefix of every endpoint).  Knobs ride as query
parameters or keyword arguments (keywords win); ``connect_retries`` / ``retry_delay``
(``from_url`` only) wait for a node that is starting or has no leader.
"""

from __future__ import annotations

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
