"""The layout of a jsondir directory: its files, how an id becomes a file name, its format.

Layout (format :data:`FORMAT`)::

    <dir>/.lock                    the file lock every operation holds
    <dir>/state.json               index of executions (summaries, versions, commit times), the
                                   outbox, spawn intents, timers and dedupe marks with their ages
    <dir>/journal.json             a multi-file write's new texts, present only between its
                                   commit point and its completion
    <dir>/executions/<name>.json   one execution document per id (the document holds the id)
    <dir>/traces/<name>.json       one trace ring per id (the ring holds the id)

``<name>`` is the SHA-256 of the id's UTF-8 bytes in hex: 64 characters whatever the id (an id
of 64 KiB in any Unicode plane, quotes, slashes, dots, lone surrogates), so no path ever grows
with an id and every file system accepts it.  The name is one-way: the real id is stored inside
the file and checked on every read, so a (practically impossible) collision or a file copied in
by hand is reported as :class:`~harel.store.errors.StoreCorrupted`, never served as another
execution.

:func:`is_store_file` is the whitelist of paths a write may touch; journal replay refuses any
other path, so a forged journal can never write outside the directory.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from harel.store.errors import SchemaVersionError, StoreCorrupted

FORMAT = 2
"""Version of the layout.  Format 1 (base32 file names) is refused with a message."""

LOCK = ".lock"
STATE = "state.json"
JOURNAL = "journal.json"
EXECUTIONS = "executions"
TRACES = "traces"
SUFFIX = ".json"
TEMP_PREFIX = ".tmp-"
FOLDERS = (EXECUTIONS, TRACES)

_STORE_FILE = re.compile(rf"(?:{STATE}|(?:{EXECUTIONS}|{TRACES})/[0-9a-f]{{64}}\{SUFFIX})\Z")


def name_of(execution_id: str) -> str:
    """The bounded, file-system-safe file name stem of ``execution_id`` (64 hex digits)."""
    raw = execution_id.encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()


def document_path(execution_id: str) -> str:
    """Relative path of the execution's document."""
    return f"{EXECUTIONS}/{name_of(execution_id)}{SUFFIX}"


def trace_path(execution_id: str) -> str:
    """Relative path of the execution's trace ring."""
    return f"{TRACES}/{name_of(execution_id)}{SUFFIX}"


def is_store_file(relative: object) -> bool:
    """Whether ``relative`` is a path this store writes (``state.json`` or a named file).

    Anything else — absolute paths, ``..``, other folders, names that are not 64 hex digits —
    is refused, which confines every write (journal replay included) to the directory.
    """
    return isinstance(relative, str) and _STORE_FILE.match(relative) is not None


def check_format(data: Any, what: str) -> dict[str, Any]:
    """``data`` when it is a JSON object of this layout format.

    ``StoreCorrupted`` when it is not a JSON object, ``SchemaVersionError`` when another
    release's format wrote it.
    """
    if not isinstance(data, dict):
        raise StoreCorrupted(f"{what} is not a JSON object; restore the directory from a backup")
    found = data.get("format")
    if found != FORMAT:
        raise SchemaVersionError(
            f"{what} has layout format {found!r}, this harel-example-jsondir reads format "
            f"{FORMAT}; open the directory with the release that wrote it or start a new one"
        )
    return data
