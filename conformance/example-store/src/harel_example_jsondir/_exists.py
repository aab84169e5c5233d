"""``store_exists(url)``: whether a jsondir store exists at ``url`` (creates nothing).

The ``exists`` hook of the plugin's registration: harel-core calls it for
``open_store(url, create=False)`` (the CLI's read-only commands), so ``harel list --store
jsondir://typo`` makes no directory.  The store exists once its directory holds the format
file (``state.json``), which the first open writes.
"""

from __future__ import annotations

from typing import Any

from harel_example_jsondir import _schema
from harel_example_jsondir._spec import parse_url


def store_exists(url: str, **knobs: Any) -> bool:
    """Whether ``url``'s directory holds ``state.json``; only looks.  Errors: InvalidStoreURL."""
    return (parse_url(url, **knobs).directory / _schema.STATE).is_file()
