"""A MongoDB connection string cut the way PyMongo cuts it (the hosts end at the first ``/``),
the text of every part kept as written; no PyMongo needed."""

from __future__ import annotations

from urllib.parse import unquote_plus

from harel.store.author import redact_url
from harel.store.errors import InvalidStoreURL

FORMS = ("mongodb://host:27017/?db=harel", "mongodb+srv://cluster.example.net/?db=harel")


def cut(url: str) -> tuple[str, str, str, str, list[tuple[str, str]]]:
    """``(scheme://authority/authdb, credentials, hosts, authdb, [(key, pair)])`` as written,
    cut the way PyMongo cuts a connection string (the hosts end at the first ``/``)."""
    scheme, _, rest = url.partition("://")
    authority, slash, tail = rest.partition("/")
    credentials, _, hosts = authority.rpartition("@")
    if not slash and "?" in authority:
        problem = f"a '/' must separate the hosts from the options ({FORMS[0]})"
    elif not hosts:
        problem = f"it names no host ({FORMS[0]})"
    elif "#" in tail:
        problem = "a MongoDB URL has no fragment ('#'); percent-encode it"
    else:
        authdb, _, query = tail.partition("?")
        texts = [text for text in query.replace(";", "&").split("&") if text]
        pairs = [(unquote_plus(text.partition("=")[0]), text) for text in texts]
        return f"{scheme.lower()}://{authority}/{authdb}", credentials, hosts, authdb, pairs
    raise InvalidStoreURL(f"{redact_url(url)}: {problem}")
