"""The upstream worker's environment variables for Redis (read only when ``STM_STORE_URL`` is
not set).  Imports no driver."""

from __future__ import annotations

from collections.abc import Mapping

VARIABLES = ("STM_STORE_REDIS_URL", "STM_REDIS_URL")
"""Checked in this order; the first one set wins."""


def url_from_env(env: Mapping[str, str]) -> str | None:
    """The store URL the legacy variables name, or ``None`` when neither is set."""
    for name in VARIABLES:
        value = env.get(name)
        if value is not None and value.strip():
            return value.strip()
    return None
