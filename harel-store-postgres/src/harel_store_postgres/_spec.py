"""The PostgreSQL backend as core's registry and URL parsing see it; imports no psycopg.

URL form (libpq's): ``postgresql://[user[:password]@][host][:port][/dbname][?knob=value&...]``
(also ``postgres://``).  Knobs ride as query parameters or keyword arguments (keywords win);
``connect_retries`` / ``retry_delay`` (8, 0.5 s doubled per retry) bound the wait of the *open*
only.  Every other query parameter must be a libpq connection keyword (``sslmode``,
``application_name``, ``options``, ...) and goes to libpq unchanged; ``connect_timeout``
defaults to 5 seconds.  While the server is down a call fails within ``pool_timeout``; once it
is back the same store serves again within about ``reconnect_timeout``.  The password never
appears in a message or a ``repr``: messages use the redacted URL.
"""

from __future__ import annotations

from typing import Any

from harel.store.author import BackendSpec, Knob, StoreURL, trace_max_knob
from harel.store.contract import Capabilities
from harel.store.errors import InvalidStoreOption

DISTRIBUTION = "harel-store-postgres"
LEGACY_VARIABLE = "STM_POSTGRES_DSN"
LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/test"
"""The server the tests use when ``HAREL_TEST_POSTGRES_URL`` is not set (the kit's harness
makes a fresh schema per run there and drops it afterwards)."""
DEFAULT_CONNECT_TIMEOUT = "5"
MAX_IDENTIFIER_BYTES = 63
"""PostgreSQL truncates longer identifiers (NAMEDATALEN - 1); a schema name must fit."""
LIBPQ_KNOBS = frozenset(
    "application_name channel_binding client_encoding connect_timeout dbname "  # noqa: SIM905
    "fallback_application_name gssencmode gsslib host hostaddr keepalives keepalives_count "
    "keepalives_idle keepalives_interval krbsrvname load_balance_hosts options passfile "
    "password port require_auth requiressl service sslcert sslcompression sslcrl sslcrldir "
    "sslkey sslmode sslnegotiation sslpassword sslrootcert sslsni target_session_attrs "
    "tcp_user_timeout user".split()  # 36 words: one per line (a literal) would bury the spec
)
"""libpq connection keywords a URL may carry in its query (passed to libpq as they are)."""


def check_schema(schema: str) -> str:
    """``schema`` when PostgreSQL can hold it as a schema name exactly as given: any text is
    quoted safely; refused are the empty name, NUL, lone surrogates, names over 63 UTF-8 bytes
    (PostgreSQL would silently truncate them) and the reserved ``pg_`` prefix."""
    if not schema:
        raise InvalidStoreOption(f"schema must be a non-empty name, got {schema!r}")
    if "\x00" in schema:
        raise InvalidStoreOption("schema name must not hold NUL")
    try:
        size = len(schema.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidStoreOption("schema name must be valid Unicode text") from None
    if size > MAX_IDENTIFIER_BYTES:
        raise InvalidStoreOption(
            f"schema name {schema[:20]!r}... is {size} bytes; PostgreSQL names hold at most "
            f"{MAX_IDENTIFIER_BYTES} bytes"
        )
    if schema.startswith("pg_"):
        raise InvalidStoreOption(f"schema name {schema!r} is reserved (pg_ prefix); pick another")
    return schema


def _pool_rule(values: dict[str, Any]) -> None:
    if values["pool_max"] < values["pool_min"]:
        raise InvalidStoreOption(
            f"option pool_max={values['pool_max']} must be >= pool_min={values['pool_min']}"
        )


def _location(parsed: StoreURL) -> dict[str, Any]:
    """libpq's connection keywords (the URL's parts, then its libpq query parameters) and the
    redacted URL that names the store in messages."""
    connect = {"connect_timeout": DEFAULT_CONNECT_TIMEOUT}
    dbname = parsed.path[1:] if parsed.path.startswith("/") else parsed.path
    parts = {"host": parsed.host, "user": parsed.username, "dbname": dbname}
    connect.update((key, value) for key, value in parts.items() if value)
    if parsed.port is not None:
        connect["port"] = str(parsed.port)
    if parsed.password is not None:
        connect["password"] = parsed.password
    return {"connect": {**connect, **parsed.query}, "where": parsed.redacted}


SPEC = BackendSpec(
    name="postgres",
    title="PostgreSQL",
    schemes=("postgresql", "postgres"),
    url_forms=("postgresql://user@host:5432/dbname?schema=harel",),
    store="harel_store_postgres.sync:PostgresStore",
    async_store="harel_store_postgres.aio:AsyncPostgresStore",
    capabilities=Capabilities(
        persistent=True, multi_process=True, ordered_listing=True, exact_pages=True
    ),
    distribution=DISTRIBUTION,
    location=_location,
    knobs=(
        Knob("schema", str, "harel", check=check_schema, doc="the schema holding the tables"),
        Knob("pool_min", int, 1, minimum=0, doc="connections the pool keeps open"),
        Knob("pool_max", int, 10, minimum=1, doc="connections the pool opens at most"),
        Knob("pool_timeout", float, 5.0, minimum=0, doc="seconds a call waits for a connection"),
        Knob("reconnect_timeout", float, 2.0, minimum=0, doc="seconds a lost one is retried"),
        trace_max_knob(),
    ),
    check=_pool_rule,
    passthrough=LIBPQ_KNOBS,
    retry=(8, 0.5),
    legacy_env="harel_store_postgres._legacy:url_from_env",
    legacy_vars=(LEGACY_VARIABLE,),
    harness="harel_store_postgres.testing:harness_from_url",
    local_url=LOCAL_URL,
    exists="harel_store_postgres._exists:store_exists",
    description="PostgreSQL (psycopg 3 + connection pool); one round trip per commit",
)
"""The backend's declaration; the ``harel.stores`` entry point names it."""
CAPABILITIES = SPEC.capabilities
"""A server-side durable database shared by any number of processes; listing is a keyset over
the ``id`` index, so pages are ordered by id and exact."""
