"""One rqlite store's validated settings: :class:`RqliteOptions`, built from a URL and the
knobs :data:`~harel_store_rqlite._spec.SPEC` declares (:func:`make_options`,
:func:`open_options`), and the TLS context they share."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from harel_store_rqlite._spec import SPEC, _location


@dataclass(frozen=True, slots=True)
class RqliteOptions:
    """Validated settings of one store (build it with :func:`make_options`; ``repr`` never
    shows the password)."""

    base_url: str
    """``http(s)://host:port[/prefix]``, without credentials."""
    username: str | None
    password: str | None = field(repr=False)
    trace_max: int | None
    timeout: float
    level: str
    sweep_level: str
    unified: bool
    verify: bool
    ca_file: str | None
    redirects: int

    @property
    def where(self) -> str:
        """The node as named in messages (no credentials)."""
        return f"rqlite node {self.base_url}"

    @property
    def auth(self) -> tuple[str, str] | None:
        """HTTP basic auth credentials, if the URL had a user."""
        return None if self.username is None else (self.username, self.password or "")

    def tls(self) -> ssl.SSLContext | bool:
        """httpx's ``verify``: ``False`` for plain HTTP or ``verify=false``, else a verifying
        context (trusting ``ca_file`` when given) shared by the stores of this process."""
        if not self.verify or not self.base_url.startswith("https:"):
            return False
        return _tls_context(self.ca_file)


@lru_cache(maxsize=8)
def _tls_context(ca_file: str | None) -> ssl.SSLContext:
    """A verifying client context: the system's CAs, or those of ``ca_file``."""
    return ssl.create_default_context(cafile=ca_file)


def make_options(url: str, **knobs: Any) -> RqliteOptions:
    """The settings of the node ``url`` names with its knobs and ``knobs`` (keywords win),
    each checked against :data:`SPEC` (``InvalidStoreURL`` / ``InvalidStoreOption``)."""
    parsed, url_knobs, _retry = SPEC.parse_url(url)
    return _options({**_location(parsed), **SPEC.knob_values({**url_knobs, **knobs})})


def open_options(url: str, knobs: dict[str, Any]) -> tuple[RqliteOptions, dict[str, Any]]:
    """``from_url``'s settings, the URL parsed once (as :func:`make_options`, and
    ``connect_retries`` / ``retry_delay`` also as keywords), and the keyword arguments of
    ``connect_with_retry``."""
    arguments, retry = SPEC.open_args(url, knobs)
    return _options(arguments), retry


def _options(values: dict[str, Any]) -> RqliteOptions:
    if values["sweep_level"] == "level":  # optional=True would read the level "none" as None
        values["sweep_level"] = values["level"]
    return RqliteOptions(**values)
