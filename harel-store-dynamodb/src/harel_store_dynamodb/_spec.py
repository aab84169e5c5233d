"""The DynamoDB backend as core's registry and URL parsing see it; imports no boto3/aioboto3.

URL forms: ``dynamodb://TABLE?region=eu-west-1`` (the host part is the table, case kept;
credentials from AWS's chain, or ``&profile=NAME``), ``dynamodb://KEY_ID:SECRET@TABLE?...``
(explicit credentials, never printed), ``dynamodb://TABLE?endpoint_url=http://h:8000&local=true``
(DynamoDB Local, moto), ``dynamodb://TABLE?local=moto`` (an in-process moto server, tests).
Knobs ride as query parameters or keyword arguments (keywords win); ``connect_retries`` /
``retry_delay`` (``from_url`` only) retry while the endpoint is unreachable.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from harel.store.author import (
    BackendSpec,
    Knob,
    StoreURL,
    parse_store_url,
    redact_url,
    trace_max_knob,
)
from harel.store.contract import Capabilities
from harel.store.errors import InvalidStoreOption, InvalidStoreURL

from harel_store_dynamodb._schema import DISTRIBUTION
from harel_store_dynamodb._schema import MAX_INDEX_SHARDS as MAX_SHARDS

SCHEME = "dynamodb"
FORMS = ("dynamodb://TABLE?region=...",)
LOCAL_REGION = "us-east-1"
LEGACY_VARS = ("STM_DYNAMODB_ENDPOINT", "STM_AWS_REGION", "STM_DYNAMODB_TABLE")
LOCAL = ("false", "true", "moto")
SHARDS = "GSI1 partitions per kind of a new table (None: the table's count)"
_TABLE = re.compile(r"[A-Za-z0-9_.-]{3,255}\Z")
_KEYS = ("aws_access_key_id", "aws_secret_access_key")


def table_name(table: object, where: str) -> str:
    """``table`` if it is a valid DynamoDB table name, else :class:`InvalidStoreURL`."""
    if not isinstance(table, str) or not _TABLE.match(table):
        raise InvalidStoreURL(
            f"{where} does not name a valid table (3-255 of A-Z a-z 0-9 _ . -): {FORMS[0]}"
        )
    return table


def _text(name: str, doc: str, *schemes: str) -> Knob:
    """An optional text knob that is not blank (and starts with one of ``schemes``, if any)."""
    wanted = f"an {' or '.join(schemes)} URL" if schemes else "a non-empty string"

    def check(value: str) -> str:
        if not value.strip() or not value.startswith(schemes or ("",)):
            shown = redact_url(value) if schemes else value  # a URL may hold a password
            raise InvalidStoreOption(f"option {name}={shown!r} must be {wanted}")
        return value

    return Knob(name, str, None, optional=True, check=check, doc=doc)


def _parse(url: str) -> StoreURL:
    """``parse_store_url``, with a ``dynamodb://`` URL's ``KEY_ID:SECRET@`` moved into its
    query as the two credential knobs (so keywords win over them, as over any knob)."""
    parsed = parse_store_url(url)
    if parsed.scheme != SCHEME or (parsed.username is None and parsed.password is None):
        return parsed
    if not parsed.username or not parsed.password or set(_KEYS) & set(parsed.query):
        raise InvalidStoreURL(
            f"credentials in {parsed.redacted!r} must be ACCESS_KEY_ID:SECRET_ACCESS_KEY@, given "
            "once (percent-encode special characters)"
        )
    key_id, secret = _KEYS
    return parsed.with_query({**parsed.query, key_id: parsed.username, secret: parsed.password})


def _location(parsed: StoreURL) -> dict[str, Any]:
    """The table the URL's raw host part names (a parsed host would be lower-cased)."""
    where = repr(parsed.redacted)
    table = urlsplit(parsed.raw).netloc.rpartition("@")[2]
    if parsed.port is not None or ":" in table:
        raise InvalidStoreURL(
            f"{where} names a port; the host part of a dynamodb:// URL is the table name "
            "(give a server as ?endpoint_url=http://host:port)"
        )
    if parsed.path not in ("", "/"):
        raise InvalidStoreURL(f"{where} has a path; write {FORMS[0]}")
    return {"table": table_name(table, where)}


def _both_keys(values: dict[str, Any]) -> None:
    if (values[_KEYS[0]] is None) != (values[_KEYS[1]] is None):
        raise InvalidStoreOption(f"give both {_KEYS[0]} and {_KEYS[1]}, or neither")


SPEC = BackendSpec(
    name="dynamodb",
    title="DynamoDB",
    schemes=(SCHEME,),
    url_forms=FORMS,
    store="harel_store_dynamodb.sync:DynamoDBStore",
    async_store="harel_store_dynamodb.aio:AsyncDynamoDBStore",
    capabilities=Capabilities(
        persistent=True, multi_process=True, ordered_listing=True, exact_pages=True
    ),
    distribution=DISTRIBUTION,
    location=_location,
    parser=_parse,
    knobs=(
        _text("region", "AWS region (us-east-1 with local)"),
        _text("endpoint_url", "another endpoint (DynamoDB Local, moto)", "http://", "https://"),
        _text("profile", "AWS profile"),
        Knob("local", str, "false", choices=LOCAL, doc="true: local server; moto: start one"),
        Knob("create_table", bool, False, doc="create the table if missing, wait until ACTIVE"),
        trace_max_knob(),
        Knob("request_timeout", float, 10.0, above=0, doc="connect/read seconds per request"),
        Knob("max_attempts", int, 3, minimum=1, doc="botocore's attempts per request"),
        Knob("index_shards", int, None, minimum=1, maximum=MAX_SHARDS, optional=True, doc=SHARDS),
        *(Knob(key, str, None, optional=True, secret=True, doc="credential") for key in _KEYS),
    ),
    check=_both_keys,
    retry=(4, 0.5),
    legacy_env="harel_store_dynamodb._legacy:legacy_url",
    legacy_vars=LEGACY_VARS,
    harness="harel_store_dynamodb.testing:harness_from_url",
    local_url="dynamodb://harel-kit?local=moto",
    exists="harel_store_dynamodb._exists:store_exists",
    description="Amazon DynamoDB, one table (boto3; async over aioboto3)",
)
"""The backend's declaration; the ``harel.stores`` entry point names it."""
CAPABILITIES = SPEC.capabilities
"""Managed durable storage, any number of processes (conditional transactions), listing from
an index sorted by id, exact pages (filters are applied server-side, pages refilled)."""
