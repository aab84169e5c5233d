"""The upstream worker's variable ``STM_POSTGRES_DSN`` as a store URL (no driver import).

``STM_POSTGRES_DSN`` holds either a ``postgresql://`` URL (returned as it is) or a libpq
``key=value`` DSN such as ``host=db port=5432 dbname=app user=worker password='a b'``, which
becomes ``postgresql://worker:a%20b@db:5432/app``; other keywords (``sslmode``...) ride in the
query.  Used by ``harel.registry.store_from_env`` when ``STM_STORE_URL`` is not set (the
spec, ``_spec.SPEC``, names this module's :func:`url_from_env` as its ``legacy_env``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import quote, urlencode

from harel.store.errors import StoreConfigError

from harel_store_postgres._spec import LEGACY_VARIABLE as VARIABLE

_KEYWORD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*")


def url_from_env(env: Mapping[str, str]) -> str | None:
    """The store URL ``STM_POSTGRES_DSN`` names, or ``None`` when it is not set.

    :class:`StoreConfigError` (naming the variable, never its value) when it is malformed.
    """
    raw = (env.get(VARIABLE) or "").strip()
    if not raw:
        return None
    if "://" in raw:
        return raw
    return dsn_to_url(parse_dsn(raw))


def parse_dsn(dsn: str) -> dict[str, str]:
    """The keywords of a libpq ``key=value`` DSN (values may be single-quoted, with ``\\'``
    and ``\\\\`` escapes)."""
    params: dict[str, str] = {}
    position, end = 0, len(dsn)
    while dsn[position:].strip():
        match = _KEYWORD.match(dsn, position)
        if match is None:
            raise StoreConfigError(
                f"{VARIABLE} is neither a postgresql:// URL nor a libpq 'key=value' DSN "
                f"(unexpected text at character {position})"
            )
        position = match.end()
        value, position = _value(dsn, position, end)
        params[match.group(1)] = value
    return params


def _value(dsn: str, position: int, end: int) -> tuple[str, int]:
    if position < end and dsn[position] == "'":
        chars: list[str] = []
        position += 1
        while position < end and dsn[position] != "'":
            if dsn[position] == "\\" and position + 1 < end:
                position += 1
            chars.append(dsn[position])
            position += 1
        if position >= end:
            raise StoreConfigError(f"{VARIABLE} has an unterminated quoted value")
        return "".join(chars), position + 1
    start = position
    while position < end and not dsn[position].isspace():
        position += 1
    return dsn[start:position], position


def dsn_to_url(params: Mapping[str, str]) -> str:
    """A ``postgresql://`` URL carrying the same connection keywords."""
    rest = dict(params)
    user = quote(rest.pop("user", ""), safe="")
    password = rest.pop("password", None)
    host = rest.pop("host", "")
    port = rest.pop("port", "")
    dbname = quote(rest.pop("dbname", ""), safe="")
    credentials = user + ("" if password is None else ":" + quote(password, safe=""))
    if host.startswith("/"):  # a Unix socket directory rides in the query
        rest["host"], host = host, ""
    elif ":" in host:
        host = f"[{host}]"
    netloc = (f"{credentials}@" if credentials else "") + host + (f":{port}" if port else "")
    query = urlencode(rest)
    return f"postgresql://{netloc}/{dbname}" + (f"?{query}" if query else "")
