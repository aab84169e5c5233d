"""The one argument validator every store calls before it touches its database.

Wrong types raise ``TypeError``; bad values raise
:class:`~harel.store.errors.InvalidIdentifier` (ids and paths) or
:class:`~harel.store.errors.InvalidArgument` (numbers, flags), both ``ValueError`` subclasses in
the :class:`~harel.store.errors.StoreError` hierarchy — never a driver's ``OverflowError``,
``UnicodeEncodeError`` or ``ProgrammingError``.  The limits are documented in
:mod:`harel.store.common.limits`.

How a backend calls them (first thing in each contract method, in the shared plan or in both
drivers' one-line methods; ``commit``/``save`` need nothing more than ``committing``)::

    load(id)                       check_id(id)
    load_for_event(id, event_id)   check_event_ref(id, event_id)
    is_processed(id, event_id)     check_event_ref(id, event_id)
    ack_outbox(seq), ack_spawn     check_seq(seq)
    pending_outbox/spawns(limit)   sweep_limit(limit)           (harel.store.common.sweeps)
    due_timers(now, limit)         check_now(now); sweep_limit(limit)
    delete_timer(id, path, at)     check_timer_ref(id, path, at)
    read_trace(id)                 check_id(id)
    append_trace(id, entry)        check_id(id); encode_trace_step(entry, max_document_bytes=...)
    list_executions(...)           listing_query(...)           (harel.store.common.listing)
    purge(id, force=...)           check_id(id); check_flag(force, "force")
    prune_processed(t, batch_size) check_prune(t, batch_size)

Each returns the validated value (``check_now`` as a ``float``), so a call site reads
``execution_id = check_id(execution_id)``.
"""

from __future__ import annotations

import math
from typing import Any

from harel.store.common.limits import MAX_ID_BYTES, MAX_INT
from harel.store.errors import InvalidArgument, InvalidIdentifier, InvalidPayload


def show(value: Any, width: int = 60) -> str:
    """``repr(value)`` cut to about ``width`` characters (for messages about huge inputs)."""
    text = repr(value)
    if len(text) <= width:
        return text
    size = f"{len(value)} chars" if isinstance(value, str) else type(value).__name__
    return f"{text[:width]}... ({size})"


def surrogate_at(value: str) -> int | None:
    """Index of the first lone surrogate in ``value`` (not UTF-8 encodable), else ``None``."""
    if value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _key_text(value: object, what: str, *, empty_ok: bool) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__} {show(value)}")
    if not value and not empty_ok:
        raise InvalidIdentifier(f"{what} must be a non-empty str")
    if "\x00" in value:
        raise InvalidIdentifier(
            f"{what} {show(value)} holds NUL (U+0000) at index {value.index(chr(0))}; "
            "ids and paths cannot hold NUL on every backend"
        )
    if value.isascii():
        size = len(value)
    else:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidIdentifier(
                f"{what} {show(value)} holds a lone surrogate {value[exc.start]!r} at index "
                f"{exc.start}; ids and paths must be valid Unicode text (UTF-8 encodable)"
            ) from None
    if size > MAX_ID_BYTES:
        raise InvalidIdentifier(
            f"{what} {show(value)} is {size} bytes in UTF-8; the limit is {MAX_ID_BYTES} bytes "
            "(harel.store.common.limits.MAX_ID_BYTES): use a shorter id or a hash of it"
        )
    return value


def check_id(value: object, what: str = "execution id") -> str:
    """``value`` when it is a usable identifier: a non-empty ``str`` of at most
    ``MAX_ID_BYTES`` UTF-8 bytes without NUL or lone surrogates.

    ``TypeError`` for a non-``str``; :class:`InvalidIdentifier` otherwise.
    """
    return _key_text(value, what, empty_ok=False)


def check_optional_id(value: object, what: str) -> str | None:
    """``None`` or :func:`check_id`."""
    return None if value is None else _key_text(value, what, empty_ok=False)


def check_path(value: object, what: str = "timer path") -> str:
    """``value`` when it is a usable state path: like :func:`check_id` but may be empty."""
    return _key_text(value, what, empty_ok=True)


def check_text(value: object, what: str) -> str:
    """``value`` when it is a ``str`` a summary column can hold: no NUL, no lone surrogate
    (:class:`InvalidPayload` otherwise).

    No length limit (summary fields such as ``outcome`` and ``active_path`` are not keys).
    """
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__} {show(value)}")
    if "\x00" in value:
        raise InvalidPayload(f"{what} {show(value)} holds NUL (U+0000)")
    index = surrogate_at(value)
    if index is not None:
        raise InvalidPayload(
            f"{what} {show(value)} holds a lone surrogate {value[index]!r} at index {index}"
        )
    return value


def check_int(value: object, what: str, *, minimum: int, maximum: int = MAX_INT) -> int:
    """``value`` when it is an ``int`` (not a ``bool``) in ``[minimum, maximum]``.

    ``TypeError`` for other types, :class:`InvalidArgument` when out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {type(value).__name__} {show(value)}")
    if not minimum <= value <= maximum:
        raise InvalidArgument(f"{what} must be an int in [{minimum}, {maximum}], got {show(value)}")
    return int(value)


def check_seq(value: object, what: str = "seq") -> int:
    """An ack token: an ``int`` in ``[0, MAX_INT]`` (an unknown seq is then a no-op)."""
    return check_int(value, what, minimum=0)


def check_count(value: object, what: str) -> int:
    """A page size or batch size: an ``int`` in ``[1, MAX_INT]``."""
    return check_int(value, what, minimum=1)


def check_limit(value: object, what: str = "limit") -> int | None:
    """A sweep limit: ``None`` (unbounded) or an ``int`` in ``[1, MAX_INT]``."""
    return None if value is None else check_int(value, what, minimum=1)


def check_now(value: object, what: str = "now") -> float:
    """A point in time (epoch seconds): a finite ``int`` or ``float``, returned as ``float``.

    ``TypeError`` for other types (``bool`` included); :class:`InvalidArgument` for NaN,
    infinities and ints beyond the float range.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{what} must be a number (epoch seconds), got {type(value).__name__} {show(value)}"
        )
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise InvalidArgument(
            f"{what} must be a finite number of epoch seconds (within +-1.7976931348623157e308), "
            f"got {show(value)}"
        )
    return number


def check_flag(value: object, what: str) -> bool:
    """A keyword flag such as ``force``: exactly ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be True or False, got {type(value).__name__} {show(value)}")
    return value


def check_event_ref(execution_id: object, event_id: object) -> tuple[str, str]:
    """The arguments of ``load_for_event`` / ``is_processed``."""
    return check_id(execution_id), check_id(event_id, "event id")


def check_timer_ref(execution_id: object, path: object, fire_at: object) -> tuple[str, str, float]:
    """The arguments of ``delete_timer``."""
    return check_id(execution_id), check_path(path), check_now(fire_at, "fire_at")


def check_prune(older_than: object, batch_size: object) -> tuple[float, int]:
    """The arguments of ``prune_processed``."""
    return check_now(older_than, "older_than"), check_count(batch_size, "batch_size")


__all__ = [
    "check_count",
    "check_event_ref",
    "check_flag",
    "check_id",
    "check_int",
    "check_limit",
    "check_now",
    "check_optional_id",
    "check_path",
    "check_prune",
    "check_seq",
    "check_text",
    "check_timer_ref",
    "show",
    "surrogate_at",
]
