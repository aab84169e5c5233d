"""Store URL parsing, knob decoding and secret redaction (fail closed).

Redaction never trusts the URL to be well formed: a password may hold unescaped ``/``,
``#``, ``?`` or ``@``, so everything up to the LAST ``@`` is treated as credentials, a URL
without ``scheme://`` is hidden entirely, secret-looking query values (``password``,
``token``, ``secret``, ``auth_token``, ``sig``/``sas``, ``...key``, ...) and fragments are
masked.  When in doubt, everything after the scheme is hidden.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from urllib.parse import parse_qsl, unquote, unquote_plus, urlsplit

from harel.store.errors import InvalidStoreURL

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}

HIDDEN = "***"
"""What a redacted secret is replaced with."""

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_SECRET_KEY = re.compile(
    r"pass|pwd|secret|token|key|sig|sas|auth|cred|session|private|cert", re.IGNORECASE
)
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_PAIR_IN_TEXT = re.compile(
    r"(?i)\b([\w.-]*(?:password|passwd|pwd|secret|token|api_?key|access_?key)[\w.-]*)"
    r"(\s*=\s*)(?:'[^']*'|\"[^\"]*\"|[^\s,;&)]*[^\s,;&).:])"
)


def is_secret_key(name: str) -> bool:
    """Whether a query/option name looks like it carries a credential (masked when shown)."""
    return _SECRET_KEY.search(unquote_plus(name)) is not None


def _redact_query(query: str) -> str:
    pairs = []
    for pair in re.split(r"([&;])", query):
        if pair in ("&", ";"):
            pairs.append(pair)
            continue
        key, sep, _value = pair.partition("=")
        pairs.append(f"{key}={HIDDEN}" if sep and is_secret_key(key) else pair)
    return "".join(pairs)


def _redact_after_scheme(rest: str) -> str:
    at = rest.rfind("@")
    credentials = ""
    if at >= 0:
        userinfo, after = rest[:at], rest[at + 1 :]
        user, colon, _password = userinfo.partition(":")
        if colon and not any(char in user for char in "/?#@[]"):
            credentials = f"{user}:{HIDDEN}@"
        elif colon or "/" not in userinfo:
            credentials = f"{HIDDEN}@"  # a bare token, or a user part we cannot tell apart
        else:
            after = rest  # an '@' inside a path (sqlite:///dir@1/x.db): no credentials
    else:
        after = rest
    base, hash_sign, fragment = after.partition("#")
    base, question, query = base.partition("?")
    text = credentials + base
    if question:
        text += "?" + _redact_query(query)
    if hash_sign:
        text += "#" + (HIDDEN if fragment else "")
    return text


def redact_url(url: object) -> str:
    """``url`` with every secret hidden (safe for logs, reprs and errors); fails closed.

    Credentials (everything before the last ``@``, the user name kept only in ``user:pw@``
    form), secret-looking query values and the fragment become ``***``; a value without a
    ``scheme://`` prefix is hidden entirely.
    """
    if not isinstance(url, str):
        return f"<{type(url).__name__}, not a URL>"
    match = _SCHEME.match(url)
    if match is None:
        return f"<hidden: {len(url)} characters without scheme://>"
    try:
        return match.group(0) + _redact_after_scheme(url[match.end() :])
    except Exception:  # pragma: no cover - defensive: never echo what we cannot parse
        return match.group(0) + HIDDEN


def _redact_found(found: re.Match[str]) -> str:
    url = found.group(0)
    tail = len(url) - len(url.rstrip(".,;:!?)]}>'\""))
    if tail and "@" not in url[len(url) - tail :]:
        return redact_url(url[: len(url) - tail]) + url[len(url) - tail :]
    return redact_url(url)


_USERINFO_IN_TEXT = re.compile(r"(?<![\w.+-])([\w.~%+-]*):(?!//)(\S+)@(?=[\w\[])")


def redact_text(text: str) -> str:
    """``text`` with every URL in it redacted, ``user:password@`` without a scheme and
    ``password=...``-like pairs masked."""
    text = _URL_IN_TEXT.sub(_redact_found, text)
    text = _USERINFO_IN_TEXT.sub(lambda found: f"{found.group(1)}:{HIDDEN}@", text)
    return _PAIR_IN_TEXT.sub(lambda found: f"{found.group(1)}{found.group(2)}{HIDDEN}", text)


def url_secrets(url: str) -> list[str]:
    """The secret substrings of ``url`` (password, credential-bearing userinfo, secret query
    values, fragment), raw and percent-decoded, longest first: what must never be printed."""
    match = _SCHEME.match(url) if isinstance(url, str) else None
    if match is None:
        return [url] if isinstance(url, str) and url else []
    rest = url[match.end() :]
    found: set[str] = set()
    at = rest.rfind("@")
    if at >= 0:
        userinfo = rest[:at]
        user, colon, password = userinfo.partition(":")
        if colon:
            found.add(password)
            if any(char in user for char in "/?#@[]"):
                found.add(userinfo)
            rest = rest[at + 1 :]
        elif "/" not in userinfo:
            found.add(userinfo)  # a bare token as user name
            rest = rest[at + 1 :]
    rest, _, fragment = rest.partition("#")
    found.add(fragment)
    for pair in re.split(r"[&;]", rest.partition("?")[2]):
        key, sep, value = pair.partition("=")
        if sep and is_secret_key(key):
            found.add(value)
    values = found | {unquote_plus(item) for item in found} | {unquote(item) for item in found}
    return sorted((item for item in values if len(item) >= 2), key=len, reverse=True)


def scrub_secrets(text: str, secrets: list[str]) -> str:
    """``text`` with every URL redacted and each of ``secrets`` replaced by ``***``."""
    text = redact_text(text)
    for secret in secrets:
        text = text.replace(secret, HIDDEN)
    return text


@dataclass(frozen=True, repr=False)
class StoreURL:
    """A parsed store URL; ``str()`` and ``repr()`` never show a secret."""

    scheme: str
    username: str | None
    password: str | None = field(repr=False)
    host: str | None
    port: int | None
    path: str
    query: dict[str, str]
    raw: str = field(repr=False)

    def __str__(self) -> str:
        return redact_url(self.raw)

    def __repr__(self) -> str:
        return f"StoreURL({redact_url(self.raw)!r})"

    @property
    def redacted(self) -> str:
        """The URL with its secrets hidden."""
        return redact_url(self.raw)

    def with_query(self, query: dict[str, str]) -> StoreURL:
        """The same URL with ``query`` as its parameters (the raw text is kept for messages)."""
        return replace(self, query=dict(query))

    def knobs(self, allowed: set[str] | frozenset[str]) -> dict[str, str]:
        """The query parameters, refusing any not in ``allowed`` (naming them)."""
        unknown = sorted(set(self.query) - set(allowed))
        if unknown:
            raise InvalidStoreURL(
                f"unknown option(s) {', '.join(unknown)} in {self.redacted}"
                f"{option_suggestions(unknown, allowed)}; "
                f"allowed: {', '.join(sorted(allowed)) or 'none'}"
            )
        return dict(self.query)


def option_suggestions(unknown: Iterable[str], allowed: Iterable[str]) -> str:
    """`` (did you mean sslmode?)`` for the misspelt names among ``unknown`` that are close to
    one of ``allowed`` (``""`` when none is): ready to append to an error message."""
    choices = sorted(set(allowed))
    pairs = []
    for name in unknown:
        close = difflib.get_close_matches(name, choices, n=1, cutoff=0.7)
        if close:
            pairs.append(f"{close[0]}" if len(list(unknown)) == 1 else f"{close[0]} for {name}")
    return f" (did you mean {', '.join(pairs)}?)" if pairs else ""


FILE_SCHEMES = frozenset({"sqlite", "libsql+file", "jsondir"})
"""Schemes whose URL names a file or folder: ``scheme:///relative`` or ``scheme:////abs``."""
_TYPO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)([:/\\]+)(.*)", re.DOTALL)


def close_scheme(scheme: str, known: Iterable[str]) -> str | None:
    """The known scheme ``scheme`` most likely misspells (itself when known), else ``None``."""
    choices = sorted({item.lower() for item in known})
    lowered = scheme.lower()
    if lowered in choices:
        return lowered
    close = difflib.get_close_matches(lowered, choices, n=1, cutoff=0.75)
    return close[0] if close else None


def url_typo_hint(url: str, known: Iterable[str]) -> str | None:
    """What ``url`` (which lacks a well-formed ``scheme://``) most likely meant, or ``None``.

    Only when its scheme-like prefix is a known scheme or close to one (so the prefix is no
    password): ``sqlite:/x.db`` gives ``did you mean sqlite:///x.db?``.  The text after the
    prefix is echoed only when it cannot hold a secret (no ``@``, ``:``, ``?`` or ``#``);
    otherwise the hint shows the prefix, names the scheme and hides the rest.
    """
    found = _TYPO.fullmatch(url)
    if found is None:
        return None
    prefix, separator, rest = found.groups()
    scheme = close_scheme(prefix, known)
    if scheme is None:
        return None
    typed = f"{prefix}{separator}"
    if any(char in rest for char in "@?#:") or not rest:
        return (
            f"{typed!r}... (the rest is not shown: it may hold a password) lacks a well-formed "
            f"scheme://: write {scheme}://..."
        )
    if scheme in FILE_SCHEMES:
        path = rest.lstrip("/")
        return (
            f"{url!r} lacks a well-formed scheme://: did you mean {scheme}:///{path}? "
            f"({scheme}:////{path} for an absolute path)"
        )
    return f"{url!r} lacks a well-formed scheme://: did you mean {scheme}://{rest}?"


_SCHEME_SOURCES: list[Callable[[], Iterable[str]]] = []


def add_scheme_source(source: Callable[[], Iterable[str]]) -> None:
    """Let the typo hints of :func:`parse_store_url` also know the schemes ``source`` returns
    (the registry adds those of the backends it has discovered; nothing here imports it)."""
    _SCHEME_SOURCES.append(source)


def _known_schemes() -> set[str]:
    """The first-party schemes and those every scheme source knows now (no discovery)."""
    try:
        from harel.registry._firstparty import first_party_schemes
    except ImportError:  # pragma: no cover - a partial install
        return set()
    known = first_party_schemes()
    for source in _SCHEME_SOURCES:
        known |= set(source())
    return known


_ENCODE_HINT = (
    "if the password holds / ? # @ or :, percent-encode them "
    "(/ as %2F, ? as %3F, # as %23, @ as %40, : as %3A)"
)


def parse_store_url(url: str) -> StoreURL:
    """Parse ``url`` into a :class:`StoreURL`; :class:`InvalidStoreURL` when it is malformed.

    Error messages show the URL redacted and never chain an exception that could echo it.
    """
    if not isinstance(url, str) or not url.strip():
        shown = repr(url) if isinstance(url, str) else f"a {type(url).__name__}"
        raise InvalidStoreURL(f"a store URL must be a non-empty string, got {shown}")
    if _SCHEME.match(url) is None:
        hint = url_typo_hint(url, _known_schemes())
        if hint is not None:
            raise InvalidStoreURL(f"not a store URL: {hint}")
        raise InvalidStoreURL(
            f"{redact_url(url)} is not a store URL: expected scheme://..., "
            "e.g. sqlite:///app.db (the value is not shown: it may hold a password)"
        )
    rest = url[url.index("://") + 3 :]
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" not in authority and ":" in authority and "@" in rest.split("?", 1)[0]:
        raise InvalidStoreURL(
            f"store URL {redact_url(url)} has an '@' after its host part: {_ENCODE_HINT}"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        port = -1  # raised below, outside the handler: no chained error echoes the URL
    if port == -1:
        raise InvalidStoreURL(
            f"malformed store URL {redact_url(url)}: its host or port cannot be read; "
            f"{_ENCODE_HINT}"
        )
    query: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if key in query:
            raise InvalidStoreURL(f"option {key!r} is given twice in {redact_url(url)}")
        query[key] = value
    return StoreURL(
        scheme=parts.scheme.lower(),
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
        host=parts.hostname,
        port=port,
        path=unquote(parts.path),
        query=query,
        raw=url,
    )


def _shown(knobs: dict[str, str], name: str) -> str:
    return HIDDEN if is_secret_key(name) else repr(knobs[name])


def knob_int(knobs: dict[str, str], name: str, default: int, *, minimum: int = 0) -> int:
    """An integer knob; the error names the knob and the value."""
    if name not in knobs:
        return default
    try:
        value = int(knobs[name])
    except ValueError:
        raise InvalidStoreURL(f"option {name}={_shown(knobs, name)} must be an integer") from None
    if value < minimum:
        raise InvalidStoreURL(f"option {name}={value} must be >= {minimum}")
    return value


def knob_float(knobs: dict[str, str], name: str, default: float, *, minimum: float = 0.0) -> float:
    """A float knob; the error names the knob and the value."""
    if name not in knobs:
        return default
    try:
        value = float(knobs[name])
    except ValueError:
        raise InvalidStoreURL(f"option {name}={_shown(knobs, name)} must be a number") from None
    if not value >= minimum:
        raise InvalidStoreURL(f"option {name}={value} must be >= {minimum}")
    return value


def knob_bool(knobs: dict[str, str], name: str, default: bool) -> bool:
    """A boolean knob (1/0, true/false, yes/no, on/off)."""
    if name not in knobs:
        return default
    text = knobs[name].strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise InvalidStoreURL(f"option {name}={_shown(knobs, name)} must be true or false")


def knob_choice(knobs: dict[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
    """A knob restricted to ``choices`` (case-insensitive)."""
    if name not in knobs:
        return default
    value = knobs[name].strip().upper()
    allowed = {choice.upper(): choice for choice in choices}
    if value not in allowed:
        raise InvalidStoreURL(
            f"option {name}={_shown(knobs, name)} must be one of {', '.join(choices)}"
        )
    return allowed[value]
