"""libSQL's three modes — a local **file**, a **server**, an embedded **replica** of one — as
a database string names them, what a server URL (a ``database`` or a ``sync_url``) must be,
and the token a server or a replica takes; imports no driver."""

from __future__ import annotations

from typing import Literal

from harel.store.author import parse_store_url
from harel.store.errors import InvalidStoreOption

MEMORY = ":memory:"
REMOTE_SCHEMES = ("libsql", "https", "http")
"""How a server URL may be spelled as a ``database`` or a ``sync_url`` (``libsql`` = HTTPS)."""
Mode = Literal["file", "server", "replica"]


def check_server(url: str, what: str) -> str:
    """``url`` if the driver can use it as a server: ``libsql``/``https``/``http``, a host, no
    credentials, path or query (the token travels as ``auth_token``, never in a URL)."""
    parsed = parse_store_url(url)
    shown = parsed.redacted
    if parsed.scheme not in REMOTE_SCHEMES:
        raise InvalidStoreOption(f"{what} {shown} must be a libsql://, https:// or http:// URL")
    if parsed.username is not None or parsed.password is not None:
        raise InvalidStoreOption(f"{what} {shown} holds credentials; pass the token as auth_token")
    if not parsed.host:
        raise InvalidStoreOption(f"{what} {shown} names no server; use libsql://host[:port]")
    if parsed.query or "#" in url or parsed.path not in ("", "/"):
        raise InvalidStoreOption(f"{what} {shown} must be scheme://host[:port] only (no path)")
    return url


def check_token(token: str) -> str | None:
    """The token (``""``: none), refused unshown if it holds whitespace or control characters."""
    if any(char.isspace() or ord(char) < 32 for char in token):
        raise InvalidStoreOption(
            "option auth_token holds whitespace or control characters (value not shown)"
        )
    return token or None
