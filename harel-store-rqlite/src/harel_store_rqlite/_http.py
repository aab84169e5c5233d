"""The HTTP side of ``RqliteStore``: its ``httpx.Client`` settings and sending one call.

Everything else about a request (endpoints, levels, redirects, status and result mapping) is
sans-IO in :mod:`harel_store_rqlite._wire`; the async store reuses the sync one through a
worker thread (:mod:`harel_store_rqlite.aio`), so this is the only code that touches httpx.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import httpx

from harel_store_rqlite._errors import closed_error, transport_error
from harel_store_rqlite._options import RqliteOptions
from harel_store_rqlite._wire import JSON_HEADERS, VERSION_HEADER, HttpCall, HttpReply


def live(
    client: httpx.Client | None, operation: Generator[Any, Any, Any], options: RqliteOptions
) -> httpx.Client:
    """The store's client, or (closing the unstarted ``operation``) the "store is closed"
    error."""
    if client is None:
        operation.close()
        raise closed_error(options)
    return client


def client_settings(options: RqliteOptions) -> dict[str, Any]:
    """Keyword arguments of the store's ``httpx.Client``.

    Basic auth from the URL, the request timeout, TLS verification, JSON content type; no
    automatic redirects (the wire follows leader redirects itself, keeping method and body,
    where httpx would turn a 301 POST into a GET) and no proxy or ``.netrc`` settings from the
    environment (a database client talks to its node directly).
    """
    return {
        "auth": options.auth,
        "timeout": options.timeout,
        "verify": options.tls(),
        "headers": JSON_HEADERS,
        "follow_redirects": False,
        "trust_env": False,
    }


def send(client: httpx.Client, options: RqliteOptions, call: HttpCall) -> HttpReply:
    """Send one call and return the part of the reply the wire reads.

    Any failure of the HTTP client (httpx's own errors, its "the client has been closed"
    ``RuntimeError``, a host name the resolver cannot encode...) becomes the typed error of
    ``_errors``.
    """
    try:
        response = client.request(call.method, call.url, content=call.body)
        headers = response.headers
        return HttpReply(
            response.status_code,
            response.content,
            headers.get("location"),
            headers.get(VERSION_HEADER),
        )
    except Exception as exc:
        raise transport_error(exc, options, write=call.write) from exc
