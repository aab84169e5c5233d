"""The Redis backend's declared capabilities (no driver import, so the plugin can use them)."""

from __future__ import annotations

from harel.store.contract import Capabilities

CAPABILITIES = Capabilities(
    persistent=True,
    multi_process=True,
    ordered_listing=True,
    exact_pages=True,
)
"""Data lives in the server (a new process sees it; how it survives a *server* restart is the
server's AOF/RDB configuration), any number of processes share it (every write is one atomic
script), listing is ordered by id from lexicographic indexes, pages are exact."""
