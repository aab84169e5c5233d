"""Where things live inside a jsondir directory, and how an execution id becomes a file name.

An id may hold anything (quotes, slashes, dots, ``$``, spaces, unicode), so it never appears
raw in a path: it is the lower-case, unpadded base32 of its UTF-8 bytes, which uses only
``a-z`` and ``2-7`` (safe on every file system, case-insensitive ones included) and decodes
back to the id.  Long names are cut into components of :data:`COMPONENT_CHARS` characters so
no single path component exceeds a file system's name limit.

Layout::

    <dir>/.lock                       the filelock every operation holds
    <dir>/state.json                  index of executions, outbox, spawns, timers, dedupe marks
    <dir>/journal.json                a commit's writes, present only between commit and apply
    <dir>/executions/<name>.json      one execution document per id
    <dir>/traces/<name>.json          one trace ring per id
"""

from __future__ import annotations

import base64
import binascii

LOCK = ".lock"
STATE = "state.json"
JOURNAL = "journal.json"
EXECUTIONS = "executions"
TRACES = "traces"
SUFFIX = ".json"
TEMP_PREFIX = ".tmp-"
COMPONENT_CHARS = 128


def encode_id(execution_id: str) -> str:
    """The reversible, file-system-safe name of ``execution_id`` (one or more components)."""
    if not isinstance(execution_id, str) or not execution_id:
        raise ValueError(f"an execution id must be a non-empty str, got {execution_id!r}")
    raw = execution_id.encode("utf-8", "surrogatepass")
    name = base64.b32encode(raw).decode("ascii").rstrip("=").lower()
    parts = [name[i : i + COMPONENT_CHARS] for i in range(0, len(name), COMPONENT_CHARS)]
    return "/".join(parts)


def decode_id(name: str) -> str:
    """The id :func:`encode_id` turned into ``name``; ``ValueError`` for a foreign name."""
    text = name.replace("/", "").upper()
    try:
        raw = base64.b32decode(text + "=" * (-len(text) % 8))
        return raw.decode("utf-8", "surrogatepass")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError(f"{name!r} is not a jsondir file name") from exc


def document_path(execution_id: str) -> str:
    """Relative path of the execution's document."""
    return f"{EXECUTIONS}/{encode_id(execution_id)}{SUFFIX}"


def trace_path(execution_id: str) -> str:
    """Relative path of the execution's trace ring."""
    return f"{TRACES}/{encode_id(execution_id)}{SUFFIX}"


def id_from_path(relative_path: str) -> str:
    """The execution id of a document or trace path (the inverse of :func:`document_path`)."""
    for folder in (EXECUTIONS, TRACES):
        prefix = folder + "/"
        if relative_path.startswith(prefix) and relative_path.endswith(SUFFIX):
            return decode_id(relative_path[len(prefix) : -len(SUFFIX)])
    raise ValueError(f"{relative_path!r} is not an execution document or trace path")
