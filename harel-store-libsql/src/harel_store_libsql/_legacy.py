"""The upstream worker's environment variables for libSQL (read only when ``STM_STORE_URL`` is
not set): ``STM_LIBSQL_DB`` (a local file, or a server URL ``libsql://`` / ``https://`` /
``http://``), ``STM_LIBSQL_SYNC_URL`` (the primary of an embedded replica) and
``STM_LIBSQL_AUTH_TOKEN``.  Named by the spec's ``legacy_env`` (with ``legacy_vars``): data
cannot say it, since ``STM_LIBSQL_DB`` is either a file or a server URL.  Imports no driver.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote, urlencode

from harel.store.errors import StoreConfigError

from harel_store_libsql._modes import REMOTE_SCHEMES
from harel_store_libsql._spec import SPEC


def url_from_env(env: Mapping[str, str]) -> str | None:
    """The store URL the legacy variables name, or ``None`` when none of them is set.

    ``STM_LIBSQL_DB=app.db`` → ``libsql+file:///app.db`` (with ``sync_url`` and ``auth_token``
    from the other two variables: an embedded replica); ``STM_LIBSQL_DB=libsql://host`` →
    ``libsql://host`` (``http://host:8080`` → ``libsql://host:8080?tls=false``).  The token
    rides in the URL's query, which every message redacts.  Raises :class:`StoreConfigError`
    when the token or sync URL is set without ``STM_LIBSQL_DB``.
    """
    database, sync_url, token = (_get(env, name) for name in SPEC.legacy_vars)
    if database is None:
        if sync_url is not None or token is not None:
            raise StoreConfigError(
                "STM_LIBSQL_SYNC_URL / STM_LIBSQL_AUTH_TOKEN are set but STM_LIBSQL_DB is not: "
                "set STM_LIBSQL_DB to the local replica file or the server URL (or set "
                "STM_STORE_URL instead)"
            )
        return None
    query: dict[str, str] = {}
    scheme, sep, rest = database.partition("://")
    if sep and scheme.lower() in REMOTE_SCHEMES:
        if sync_url is not None:
            raise StoreConfigError(
                "STM_LIBSQL_SYNC_URL needs STM_LIBSQL_DB to be the local replica file, not a "
                "server URL; or drop STM_LIBSQL_SYNC_URL to talk to the server directly"
            )
        if scheme.lower() == "http":
            query["tls"] = "false"
        base = f"libsql://{rest}"
    else:
        base = f"libsql+file:///{quote(database, safe='/:')}"
        if sync_url is not None:
            query["sync_url"] = sync_url
    if token is not None:
        query["auth_token"] = token
    if not query:
        return base
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}{urlencode(query)}"


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    if value is None or not value.strip():
        return None
    return value.strip()
