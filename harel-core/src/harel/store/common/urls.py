"""Store URL parsing, knob decoding and password redaction."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

from harel.store.errors import InvalidStoreURL

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (safe for logs, reprs and errors)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        user = parts.username or ""
        return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    except ValueError:
        return "<unparseable URL>"


@dataclass(frozen=True)
class StoreURL:
    """A parsed store URL; ``str()`` and ``repr()`` never show the password."""

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

    @property
    def redacted(self) -> str:
        """The URL with its password hidden."""
        return redact_url(self.raw)

    def knobs(self, allowed: set[str] | frozenset[str]) -> dict[str, str]:
        """The query parameters, refusing any not in ``allowed`` (naming them)."""
        unknown = sorted(set(self.query) - set(allowed))
        if unknown:
            raise InvalidStoreURL(
                f"unknown option(s) {', '.join(unknown)} in {self.redacted}; "
                f"allowed: {', '.join(sorted(allowed)) or 'none'}"
            )
        return dict(self.query)


def parse_store_url(url: str) -> StoreURL:
    """Parse ``url`` into a :class:`StoreURL`; :class:`InvalidStoreURL` when it is malformed."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidStoreURL(f"a store URL must be a non-empty string, got {url!r}")
    if "://" not in url:
        raise InvalidStoreURL(
            f"{redact_url(url)!r} is not a store URL: expected scheme://..., e.g. sqlite:///app.db"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidStoreURL(f"malformed store URL {redact_url(url)!r}: {exc}") from exc
    if not parts.scheme:
        raise InvalidStoreURL(f"store URL {redact_url(url)!r} has no scheme")
    query: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if key in query:
            raise InvalidStoreURL(f"option {key!r} is given twice in {redact_url(url)!r}")
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


def knob_int(knobs: dict[str, str], name: str, default: int, *, minimum: int = 0) -> int:
    """An integer knob; the error names the knob and the value."""
    if name not in knobs:
        return default
    try:
        value = int(knobs[name])
    except ValueError:
        raise InvalidStoreURL(f"option {name}={knobs[name]!r} must be an integer") from None
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
        raise InvalidStoreURL(f"option {name}={knobs[name]!r} must be a number") from None
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
    raise InvalidStoreURL(f"option {name}={knobs[name]!r} must be true or false")


def knob_choice(knobs: dict[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
    """A knob restricted to ``choices`` (case-insensitive)."""
    if name not in knobs:
        return default
    value = knobs[name].strip().upper()
    allowed = {choice.upper(): choice for choice in choices}
    if value not in allowed:
        raise InvalidStoreURL(f"option {name}={knobs[name]!r} must be one of {', '.join(choices)}")
    return allowed[value]


def quote_path(path: str) -> str:
    """Percent-encode a filesystem path for use in a URL."""
    return quote(path)
