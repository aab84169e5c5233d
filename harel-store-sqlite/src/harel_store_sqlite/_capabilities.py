"""The SQLite backend's declared capabilities (no driver import, so the plugin can use them)."""

from __future__ import annotations

from harel.store.contract import Capabilities

CAPABILITIES = Capabilities(
    persistent=True,
    multi_process=True,
    ordered_listing=True,
    exact_pages=True,
)
"""Durable file, safe across processes (SQLite file locks), keyset listing by id, exact pages."""
