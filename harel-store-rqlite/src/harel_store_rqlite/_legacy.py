"""The upstream worker's environment variable for rqlite (read only when ``STM_STORE_URL`` is
not set).  Imports no driver."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

VARIABLE = "STM_RQLITE_URL"
"""Upstream's node address: ``http://host:4001`` (or ``https://``, or already ``rqlite://``)."""

_SCHEMES = {"http": "rqlite", "https": "rqlites"}


def url_from_env(env: Mapping[str, str]) -> str | None:
    """The store URL ``STM_RQLITE_URL`` names (``http``/``https`` become ``rqlite``/``rqlites``),
    or ``None`` when it is not set."""
    value = (env.get(VARIABLE) or "").strip()
    if not value:
        return None
    parts = urlsplit(value)
    scheme = _SCHEMES.get(parts.scheme.lower())
    return value if scheme is None else urlunsplit(parts._replace(scheme=scheme))
