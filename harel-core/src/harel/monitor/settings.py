"""What the monitor was started with, and the rule for which addresses it may bind."""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from harel.engine.config import EngineConfig
from harel.engine.definition import Definition

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TOKEN_ENV = "HAREL_MONITOR_TOKEN"
"""The environment variable read when ``--token`` is not given."""


class MonitorSetupError(Exception):
    """The monitor cannot start as asked (the message says what to change)."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and every loopback address (``127.0.0.0/8``, ``::1``)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback bind without an access token (MonitorSetupError)."""
    if token is not None and not token.strip():
        raise MonitorSetupError("the access token is empty: pass --token with a secret value")
    if token is None and not is_loopback(host):
        raise MonitorSetupError(
            f"refusing to serve on {host!r} without an access token: pass --token T "
            f"(or set {TOKEN_ENV}), or bind 127.0.0.1"
        )


@dataclass(frozen=True)
class MonitorSettings:
    """Everything a monitor page needs besides the store.

    ``store_label`` is the store URL already redacted (the raw URL is never kept here);
    ``definitions`` the machines loaded from ``--definitions DIR`` (empty: no charts and no
    send form); ``csrf`` a random secret of this process, put in every write form.
    """

    store_label: str
    token: str | None = None
    allow_writes: bool = False
    definitions: Mapping[str, Definition] = field(default_factory=dict)
    definitions_where: str = ""
    config: EngineConfig = field(default_factory=EngineConfig)
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
