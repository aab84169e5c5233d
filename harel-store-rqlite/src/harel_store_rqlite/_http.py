"""What both drivers do with httpx: build the client, send one call, read its reply.

``sync.py`` and ``aio.py`` differ only in ``httpx.Client`` vs ``httpx.AsyncClient`` (and an
``await``); everything else about a request lives in :mod:`harel_store_rqlite._wire`.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx

from harel_store_rqlite._errors import closed_error, transport_error
from harel_store_rqlite._options import RqliteOptions
from harel_store_rqlite._wire import JSON_HEADERS, HttpCall, HttpReply

C = TypeVar("C")


def live(client: C | None, operation: Generator[Any, Any, Any], options: RqliteOptions) -> C:
    """The store's client, or (closing the unstarted ``operation``) the "store is closed"
    error."""
    if client is None:
        operation.close()
        raise closed_error(options)
    return client


def client_settings(options: RqliteOptions) -> dict[str, Any]:
    """Keyword arguments of the drivers' ``httpx.Client`` / ``httpx.AsyncClient``.

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


@contextmanager
def sending(options: RqliteOptions, call: HttpCall) -> Iterator[None]:
    """Map any failure of the HTTP client while sending ``call`` to the typed error of
    ``_errors`` (httpx's own errors, its "the client has been closed" ``RuntimeError``, a host
    name the resolver cannot encode...)."""
    try:
        yield
    except Exception as exc:
        raise transport_error(exc, options, write=call.write) from exc


def reply_of(response: httpx.Response) -> HttpReply:
    """The part of a response the wire reads."""
    return HttpReply(response.status_code, response.content, response.headers.get("location"))
