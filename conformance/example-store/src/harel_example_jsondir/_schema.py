"""The layout of a jsondir directory: its files, how an id becomes a file name, its format.

Layout (format :data:`FORMAT`)::

    <dir>/.lock                    the file lock every operation holds
    <dir>/state.json               the layout format and the release that wrote it, the index
                                   of executions (summaries, versions, commit times), the
                                   outbox, spawn intents, timers, dedupe marks with their ages,
                                   the relay entries a sweep could not decode (quarantine),
                                   and each execution's receipt ring (the tokens of the
                                   commits that wrote its last RECEIPT_WINDOW versions)
                                   and the work rows of the claims (one per group of due
                                   work: priority, ready time, lease owner)
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

from harel.store.author import OpenSteps, Stored
from harel.store.errors import SchemaVersionError, StoreCorrupted

DISTRIBUTION = "harel-example-jsondir"

FORMAT = 5
"""Version of the layout.  3 added ``written_by`` and the quarantine to ``state.json``; 4 added
the receipt rings (``receipts``: execution id -> ``RECEIPT_WINDOW`` tokens or nulls, slot
``version % RECEIPT_WINDOW``), which recognise a re-sent commit; 5 added the work rows of the
claims (``work``: ``[key, priority, ready_at, owner]`` per group, key ``null`` for the
untargeted outbox entries)."""

UPGRADES = frozenset({2, 3, 4})
"""Formats that opening a directory upgrades in place (:func:`upgrade_state`).  Format 1
(base32 file names) is refused with a message."""


class JsonDirLayout(OpenSteps):
    """The formats of the shared open flow (the steps are
    :class:`harel_example_jsondir._plan.JsonDirOpen`'s): :data:`FORMAT`, :data:`UPGRADES`;
    ``where`` names the file judged."""

    current = FORMAT
    upgrades = UPGRADES
    distribution = DISTRIBUTION

    def __init__(self, where: str) -> None:
        self.where = where


SAME_FILES = frozenset({2, 3, 4, FORMAT})
"""Formats whose trace files and journal read as this one's (they did not change in 3 to 5)."""

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


def check_object(data: Any, what: str) -> dict[str, Any]:
    """``data`` when it is a JSON object with an integer ``format`` (else ``StoreCorrupted``)."""
    if not isinstance(data, dict):
        raise StoreCorrupted(f"{what} is not a JSON object; restore the directory from a backup")
    found = data.get("format")
    if isinstance(found, bool) or not isinstance(found, int):
        raise StoreCorrupted(
            f"{what} has no layout format (format={found!r}); restore the directory from a backup"
        )
    return data


def check_format(
    data: Any, what: str, accepted: frozenset[int] = frozenset({FORMAT})
) -> dict[str, Any]:
    """``data`` when it is a JSON object of a format in ``accepted``.

    ``StoreCorrupted`` when it is not a JSON object, ``SchemaVersionError`` when another
    release's format wrote it (an upgradable one: reopen the directory to upgrade it).
    """
    checked = check_object(data, what)
    found = checked["format"]
    if found in accepted:
        return checked
    if found in UPGRADES:
        raise SchemaVersionError(
            f"{what} has layout format {found}, which opening the directory upgrades to "
            f"{FORMAT}: open it again (JsonDirStore(directory)) before using it"
        )
    writer = checked.get("written_by")  # the verdict raises: neither current nor upgradable
    JsonDirLayout(what).verdict(Stored(found, writer if isinstance(writer, str) else None))
    raise SchemaVersionError(f"{what} has layout format {found}; this release reads {FORMAT}")


def upgrade_state(data: dict[str, Any], written_by: str) -> dict[str, Any]:
    """A format-2, 3 or 4 ``state.json`` object as the current format: the same tables, plus
    the release that upgraded it, the quarantine (empty from format 2), empty receipt rings
    (from formats 2 and 3: a commit stored before the upgrade is not recognised when re-sent:
    it gets ``StoreConflict``, as before) and no work rows (the caller backfills them with
    :meth:`~harel_example_jsondir._state.StoreState.backfill_work`).  Pure: the caller writes
    it."""
    found = data.get("format")
    if found not in UPGRADES:
        raise ValueError(f"upgrade_state reads formats {sorted(UPGRADES)}, got {found!r}")
    upgraded = {**data, "format": FORMAT, "written_by": written_by, "work": []}
    if found in (2, 3):
        upgraded["receipts"] = {}
    if found == 2:
        upgraded["quarantine"] = []
    return upgraded
