"""What the memory backend promises beyond the contract (shared by the plugin and the stores)."""

from __future__ import annotations

from harel.store.contract import Capabilities

CAPABILITIES = Capabilities(
    persistent=False, multi_process=False, ordered_listing=True, exact_pages=True
)
"""In-process only; listing is ordered by id with exact pages."""
