"""``store_exists(url)``: whether a SQLite store exists at ``url`` (creates nothing).

The plugin declares it as its ``exists`` hook; harel-core's registry calls it for
``open_store(url, create=False)`` (the CLI's read-only commands).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harel_store_sqlite._spec import parse_sqlite_url


def store_exists(url: str, **knobs: Any) -> bool:
    """Whether the database file ``url`` names exists (``:memory:`` always does); touches no
    file (``knobs`` shape only the open).  Errors: InvalidStoreURL."""
    path, _ = parse_sqlite_url(url)
    return path == ":memory:" or Path(path).is_file()
