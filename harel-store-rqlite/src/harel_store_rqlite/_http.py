"""What both drivers do with httpx: build the client, send one call, read its reply.

``sync.py`` and ``aio.py`` differ only in ``httpx.Client`` vs ``httpx.AsyncClient`` (and an
``await``); everything else about a request lives in :mod:`harel_store_rqlite._wire`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from harel_store_rqlite._errors import transport_error
from harel_store_rqlite._options import RqliteOptions
from harel_store_rqlite._wire import JSON_HEADERS, HttpCall, HttpReply


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
    """Map an httpx failure while sending ``call`` to the typed error of ``_errors``
    (``RuntimeError``: httpx's "the client has been closed")."""
    try:
        yield
    except (httpx.HTTPError, RuntimeError) as exc:
        raise transport_error(exc, options, write=call.write) from exc


def reply_of(response: httpx.Response) -> HttpReply:
    """The part of a response the wire reads."""
    return HttpReply(response.status_code, response.content, response.headers.get("location"))
