"""Store options: constructor knobs, their validation, and ``dynamodb://`` URL parsing.

URL forms (the host part is the table name, case kept)::

    dynamodb://TABLE?region=eu-west-1                       AWS, credentials from the usual chain
    dynamodb://TABLE?region=eu-west-1&profile=NAME          a named profile
    dynamodb://KEY_ID:SECRET@TABLE?region=eu-west-1         explicit credentials (never printed)
    dynamodb://TABLE?endpoint_url=http://127.0.0.1:8000&local=true   DynamoDB Local, moto...
    dynamodb://TABLE?local=moto                             an in-process moto server (tests)

Knobs (query parameters or ``from_url`` keywords, keywords win): ``region``, ``endpoint_url``,
``local`` (``false``; ``true``: dummy credentials and region ``us-east-1`` unless given, for a
local server; ``moto``: start an in-process moto server, needs ``moto[server]``),
``create_table`` (create the table if missing and wait until ACTIVE), ``trace_max``,
``request_timeout`` (connect/read seconds per request), ``max_attempts`` (botocore's
retries per request), ``profile``, ``index_shards`` (GSI1 partitions per kind of a new table;
an existing table's count is read from its meta item, and another explicit count is refused);
``connect_retries`` / ``retry_delay`` shape the
retries of ``from_url`` (validated by harel-core's ``retry_arguments``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypedDict
from urllib.parse import unquote, urlencode, urlsplit

from harel.store.common import parse_store_url, redact_url, retry_arguments
from harel.store.common.retry import RETRY_KNOBS, retry_knobs
from harel.store.common.urls import knob_bool, knob_choice, knob_float, knob_int
from harel.store.contract import DEFAULT_TRACE_MAX
from harel.store.errors import InvalidStoreURL

SCHEME = "dynamodb"
LOCAL_CHOICES = ("false", "true", "moto")
KNOBS = frozenset(
    {
        "region",
        "endpoint_url",
        "local",
        "create_table",
        "trace_max",
        "request_timeout",
        "max_attempts",
        "profile",
        "index_shards",
    }
)
"""Options accepted in a URL's query or as keyword arguments of ``from_url``."""
CONNECT_KNOBS = RETRY_KNOBS
"""Options of ``from_url`` (URL query or keywords) that shape its retries."""
DEFAULT_CONNECT_RETRIES = 4
DEFAULT_RETRY_DELAY = 0.5
_retry_arguments = partial(
    retry_arguments, default_retries=DEFAULT_CONNECT_RETRIES, default_delay=DEFAULT_RETRY_DELAY
)
"""``retry_arguments`` with this backend's defaults (``connect_retries=4``, ``retry_delay=0.5``)."""
DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_ATTEMPTS = 3
LOCAL_REGION = "us-east-1"
LOCAL_KEY = "harel-local"
"""The dummy access key id and secret used with ``local``: local servers accept any."""
_TABLE = re.compile(r"[A-Za-z0-9_.-]{3,255}\Z")
DEFAULT_TABLE = "harel"
"""The table of the reference implementation's forms (``DynamoDBStore(client)``,
``create()``), which took a ``prefix`` (default ``harel``): here it names the one table."""
MAX_INDEX_SHARDS = 256


@dataclass(frozen=True)
class DynamoOptions:
    """Validated settings of one store; ``repr`` and :meth:`describe` never show a secret."""

    table: str
    region: str | None = None
    endpoint_url: str | None = None
    local: str = "false"
    create_table: bool = False
    trace_max: int | None = DEFAULT_TRACE_MAX
    request_timeout: float = DEFAULT_TIMEOUT
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    profile: str | None = None
    index_shards: int | None = None
    """``None``: the table's recorded count (a new table gets ``DEFAULT_INDEX_SHARDS``)."""
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)

    @property
    def is_local(self) -> bool:
        """A local DynamoDB-compatible server (dummy credentials allowed)."""
        return self.local != "false"

    @property
    def region_name(self) -> str | None:
        """The region to sign for (``us-east-1`` for local servers unless given)."""
        return self.region or (LOCAL_REGION if self.is_local else None)

    def describe(self, endpoint_url: str | None = None) -> str:
        """``dynamodb://TABLE?region=...&endpoint_url=...`` without credentials."""
        query: dict[str, str] = {}
        if self.region_name:
            query["region"] = self.region_name
        endpoint = endpoint_url or self.endpoint_url
        if endpoint:
            query["endpoint_url"] = redact_url(endpoint)
        if self.is_local:
            query["local"] = "true" if endpoint_url else self.local
        return f"{SCHEME}://{self.table}" + (f"?{urlencode(query)}" if query else "")

    def client_kwargs(self, endpoint_url: str | None = None) -> dict[str, Any]:
        """Keyword arguments of ``session.client("dynamodb", ...)`` (config excluded)."""
        kwargs: dict[str, Any] = {"region_name": self.region_name}
        endpoint = endpoint_url or self.endpoint_url
        if endpoint:
            kwargs["endpoint_url"] = endpoint
        key, secret = self.access_key_id, self.secret_access_key
        if key is None and self.is_local:
            key, secret = LOCAL_KEY, LOCAL_KEY
        if key is not None:
            kwargs["aws_access_key_id"] = key
            kwargs["aws_secret_access_key"] = secret
        return kwargs


class StoreKnobs(TypedDict, total=False):
    """The keyword settings both store classes accept (see :func:`make_options`)."""

    region: str | None
    endpoint_url: str | None
    local: bool | str
    create_table: bool
    trace_max: int | None
    request_timeout: float
    max_attempts: int
    profile: str | None
    index_shards: int | None
    aws_access_key_id: str | None
    aws_secret_access_key: str | None


def make_options(
    table: str,
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    local: bool | str = False,
    create_table: bool = False,
    trace_max: int | None = DEFAULT_TRACE_MAX,
    request_timeout: float = DEFAULT_TIMEOUT,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    profile: str | None = None,
    index_shards: int | None = None,
    aws_access_key_id: str | None = None,
    aws_secret_access_key: str | None = None,
) -> DynamoOptions:
    """Validate constructor arguments (``TypeError``/``ValueError`` name the bad one)."""
    if not isinstance(table, str) or not _TABLE.match(table):
        raise ValueError(
            f"table must be a DynamoDB table name (3-255 of A-Z a-z 0-9 _ . -), got {table!r}"
        )
    for name, value in (("region", region), ("endpoint_url", endpoint_url), ("profile", profile)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ValueError(f"{name} must be a non-empty str or None")
    if endpoint_url is not None and not endpoint_url.startswith(("http://", "https://")):
        raise ValueError(
            f"endpoint_url must be an http:// or https:// URL, got {redact_url(endpoint_url)!r}"
        )
    mode = ("true" if local else "false") if isinstance(local, bool) else str(local).lower()
    if mode not in LOCAL_CHOICES:
        raise ValueError(f"local must be True, False or 'moto', got {local!r}")
    if trace_max is not None and (
        isinstance(trace_max, bool) or not isinstance(trace_max, int) or trace_max < 0
    ):
        raise ValueError(f"trace_max must be an int >= 0 or None, got {trace_max!r}")
    if (
        isinstance(request_timeout, bool)
        or not isinstance(request_timeout, int | float)
        or not request_timeout > 0
    ):
        raise ValueError(f"request_timeout must be seconds > 0, got {request_timeout!r}")
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise ValueError(f"max_attempts must be an int >= 1, got {max_attempts!r}")
    if index_shards is not None and (
        isinstance(index_shards, bool)
        or not isinstance(index_shards, int)
        or not 1 <= index_shards <= MAX_INDEX_SHARDS
    ):
        raise ValueError(
            f"index_shards must be an int in [1, {MAX_INDEX_SHARDS}] or None, got {index_shards!r}"
        )
    if (aws_access_key_id is None) != (aws_secret_access_key is None):
        raise ValueError("give both aws_access_key_id and aws_secret_access_key, or neither")
    return DynamoOptions(
        table=table,
        region=region,
        endpoint_url=endpoint_url,
        local=mode,
        create_table=bool(create_table),
        trace_max=trace_max,
        request_timeout=float(request_timeout),
        max_attempts=max_attempts,
        profile=profile,
        index_shards=index_shards,
        access_key_id=aws_access_key_id,
        secret_access_key=aws_secret_access_key,
    )


def parse_dynamodb_url(url: str) -> tuple[str, dict[str, Any]]:
    """The table and the typed store knobs (credentials included) of a ``dynamodb://`` URL (its
    ``connect_retries`` / ``retry_delay`` are checked but left out: they only shape
    ``from_url``).

    Raises :class:`InvalidStoreURL` (the URL redacted) for another scheme, a missing or invalid
    table, a port or path, an unknown knob or a malformed value.
    """
    table, knobs, _connect = _parse_url(url)
    return table, knobs


def _parse_url(url: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(table, store knobs, connect knobs)`` of a ``dynamodb://`` URL, all typed."""
    parsed = parse_store_url(url)
    where = parsed.redacted
    if parsed.scheme != SCHEME:
        raise InvalidStoreURL(
            f"{where!r} is not a dynamodb:// URL; use dynamodb://TABLE?region=..."
        )
    netloc = urlsplit(url).netloc
    userinfo, _, table = netloc.rpartition("@")
    if parsed.port is not None or ":" in table:
        raise InvalidStoreURL(
            f"{where!r} names a port; the host part of a dynamodb:// URL is the table name "
            "(give a server as ?endpoint_url=http://host:port)"
        )
    if parsed.path not in ("", "/"):
        raise InvalidStoreURL(f"{where!r} has a path; write dynamodb://TABLE?region=...")
    if not _TABLE.match(table):
        raise InvalidStoreURL(
            f"{where!r} does not name a valid table (3-255 of A-Z a-z 0-9 _ . -): "
            "dynamodb://TABLE?region=..."
        )
    query = parsed.knobs(KNOBS | CONNECT_KNOBS)
    knobs: dict[str, Any] = {}
    for name in ("region", "endpoint_url", "profile"):
        if name in query:
            if not query[name]:
                raise InvalidStoreURL(f"option {name} is empty in {where!r}")
            knobs[name] = query[name]
    if "endpoint_url" in knobs and not knobs["endpoint_url"].startswith(("http://", "https://")):
        raise InvalidStoreURL(f"option endpoint_url in {where!r} must be an http(s):// URL")
    if "local" in query:
        knobs["local"] = knob_choice(query, "local", "false", LOCAL_CHOICES).lower()
    if "create_table" in query:
        knobs["create_table"] = knob_bool(query, "create_table", False)
    if "trace_max" in query:
        knobs["trace_max"] = knob_int(query, "trace_max", DEFAULT_TRACE_MAX, minimum=0)
    if "request_timeout" in query:
        knobs["request_timeout"] = knob_float(
            query, "request_timeout", DEFAULT_TIMEOUT, minimum=0.001
        )
    if "max_attempts" in query:
        knobs["max_attempts"] = knob_int(query, "max_attempts", DEFAULT_MAX_ATTEMPTS, minimum=1)
    if "index_shards" in query:
        shards = knob_int(query, "index_shards", 1, minimum=1)
        if shards > MAX_INDEX_SHARDS:
            raise InvalidStoreURL(
                f"option index_shards in {where!r} must be at most {MAX_INDEX_SHARDS}"
            )
        knobs["index_shards"] = shards
    if userinfo:
        key, colon, secret = userinfo.partition(":")
        if not key or not colon or not secret:
            raise InvalidStoreURL(
                f"credentials in {where!r} must be ACCESS_KEY_ID:SECRET_ACCESS_KEY@ (percent-"
                "encode special characters)"
            )
        knobs["aws_access_key_id"] = unquote(key)
        knobs["aws_secret_access_key"] = unquote(secret)
    return table, knobs, retry_knobs(query)


def split_from_url_knobs(
    url: str, knobs: dict[str, Any]
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(table, store knobs, connect knobs)`` for ``from_url``: keywords win over the URL's.

    Unknown keywords raise :class:`InvalidStoreURL` naming them (never their values).
    """
    table, url_knobs, url_connect = _parse_url(url)
    allowed = KNOBS | CONNECT_KNOBS | {"client"}
    unknown = sorted(set(knobs) - allowed)
    if unknown:
        raise InvalidStoreURL(
            f"unknown option(s) {', '.join(unknown)} for a dynamodb store; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    store_knobs = {**url_knobs, **{k: v for k, v in knobs.items() if k not in CONNECT_KNOBS}}
    connect = {**url_connect, **{k: v for k, v in knobs.items() if k in CONNECT_KNOBS}}
    return table, store_knobs, connect


def from_url_args(url: str, knobs: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(table, store knobs, retry arguments)`` for ``from_url``: the retry arguments are
    those of ``connect_with_retry`` from harel-core's ``retry_arguments`` (a bad
    ``connect_retries`` / ``retry_delay`` raises ``ValueError`` naming it; retry only while
    the endpoint is unreachable)."""
    table, store_knobs, connect = split_from_url_knobs(url, knobs)
    return table, store_knobs, _retry_arguments(connect, what=f"DynamoDB table {table!r}")


def legacy_create_args(
    table: str | None, knobs: dict[str, Any]
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(table, store knobs, retry arguments)`` for the reference implementation's
    ``create(endpoint_url=None, region="us-east-1", prefix="harel", connect_retries=30,
    retry_delay=1.0)``: ``prefix`` names the table (default ``harel``), an ``endpoint_url``
    means a local server (dummy credentials), and the table is created when missing, as the
    reference did; the other keywords are this store's."""
    knobs = dict(knobs)
    prefix = knobs.pop("prefix", None)
    table = table or prefix or DEFAULT_TABLE
    knobs.setdefault("region", "us-east-1")
    if knobs.get("endpoint_url") is not None:
        knobs.setdefault("local", True)
    knobs.setdefault("create_table", True)
    connect = {k: knobs.pop(k) for k in list(knobs) if k in CONNECT_KNOBS}
    connect.setdefault("connect_retries", 30)
    connect.setdefault("retry_delay", 1.0)
    return table, knobs, _retry_arguments(connect, what=f"DynamoDB table {table!r}")
