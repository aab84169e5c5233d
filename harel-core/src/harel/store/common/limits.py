"""The input limits every store enforces: one rule for all backends, checked before writing.

What a store accepts it reads back equal; what it could not read back equal it refuses with a
typed error before anything is written.  The commit envelope
(:func:`harel.store.common.committing`) and the argument validators
(:mod:`harel.store.common.validate`) apply these limits, so every backend enforces the same
ones and the same input gets the same outcome everywhere.

Payload values (contexts, event data, spawn contexts, child results, trace steps)
    JSON data only: ``dict`` with ``str`` keys, ``list``, ``str``, ``int``, ``float``,
    ``bool`` and ``None`` (subclasses such as ``StrEnum`` members are stored as the base
    value).  One documented conversion: ``datetime``/``date``/``time`` are stored as ISO 8601
    text and read back as ``str``.  Refused with :class:`~harel.store.errors.InvalidPayload`
    naming the field (e.g. ``context['a'][3]``):

    * containers nested deeper than :data:`MAX_NESTING_DEPTH` (the field's own dict or list is
      level 1; a trace step's fields are each such a field);
    * dict keys that are not ``str`` (``{1: x}`` would read back as ``{"1": x}``, and ``1`` and
      ``"1"`` would collide);
    * tuples (they read back as lists), sets, bytes and any other type;
    * strings holding a lone surrogate (not UTF-8 encodable); NUL is allowed inside payloads;
    * ints outside the signed 64-bit range [:data:`MIN_INT`, :data:`MAX_INT`] (what MongoDB,
      SQLite and PostgreSQL integers and DynamoDB numbers all hold).

    Floats are kept bit-exactly, NaN and infinities included (the codec writes them as the
    JSON constants ``NaN``/``Infinity``; backends store the codec's text, never a native JSON
    type that cannot hold them).

Encoded size
    Each encoded document (the execution, each emitted event, each spawn context, the trace
    step) must fit ``max_document_bytes`` (UTF-8 bytes of the codec's JSON), else
    :class:`~harel.store.errors.PayloadTooLarge` with the limit in the message.  The default
    and the ceiling is :data:`MAX_DOCUMENT_BYTES` (16 MiB); a backend whose native limit is
    lower passes its own (e.g. ``committing(..., max_document_bytes=400_000)``).

Identifiers (execution ids, definition ids, parent ids, event ids, emit targets, child ids)
    a non-empty ``str`` of at most :data:`MAX_ID_BYTES` UTF-8 bytes, without NUL and without
    lone surrogates (PostgreSQL text cannot hold NUL; DynamoDB sort keys hold 1024 bytes).
    State paths (timer paths, root paths) follow the same rule but may be empty.  Refused with
    :class:`~harel.store.errors.InvalidIdentifier` (an ``InvalidPayload`` and an
    ``InvalidArgument``); a non-``str`` raises ``TypeError``.

Numeric arguments
    ``seq`` (acks) is an ``int`` in [0, :data:`MAX_INT`]; ``limit`` and ``batch_size`` an
    ``int`` in [1, :data:`MAX_INT`]; ``now``, ``fire_at`` and ``older_than`` a finite ``int``
    or ``float`` (beyond +-1.7976931348623157e308, NaN or infinite is refused).  Wrong types
    raise ``TypeError`` (``bool`` counts as a wrong type); bad values raise
    :class:`~harel.store.errors.InvalidArgument`, a ``ValueError``, never ``OverflowError``.
"""

from __future__ import annotations

MAX_NESTING_DEPTH = 64
"""Deepest nesting of dicts/lists in one payload field (the field's own container is 1)."""

MAX_ID_BYTES = 1024
"""Longest identifier or state path, in UTF-8 bytes."""

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
"""Largest encoded document (16 MiB): the default ``max_document_bytes`` and its ceiling."""

DEFAULT_MAX_DOCUMENT_BYTES = MAX_DOCUMENT_BYTES
"""What SQLite, memory and every backend without a lower native limit pass."""

MIN_INT = -(2**63)
"""Smallest int a payload may hold (signed 64-bit)."""

MAX_INT = 2**63 - 1
"""Largest int a payload may hold, and the largest ``seq``, ``limit`` or ``batch_size``."""

__all__ = [
    "DEFAULT_MAX_DOCUMENT_BYTES",
    "MAX_DOCUMENT_BYTES",
    "MAX_ID_BYTES",
    "MAX_INT",
    "MAX_NESTING_DEPTH",
    "MIN_INT",
]
