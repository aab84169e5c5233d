"""Listing policy shared by every store: argument validation, filters and keyset cursors.

Cursors are opaque url-safe base64 of ``{"v": 1, "after": <last id>}``: a keyset, so pages stay
stable under concurrent inserts and every backend can serve them from an index on ``id``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harel.model import ExecutionPage, ExecutionSummary, Status
from harel.store.common.limits import MAX_INT
from harel.store.common.validate import check_count, check_id, show
from harel.store.errors import InvalidArgument, InvalidCursor

_CURSOR_VERSION = 1


def encode_cursor(after_id: str) -> str:
    """The cursor that resumes a listing after ``after_id``."""
    raw = json.dumps({"v": _CURSOR_VERSION, "after": after_id}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The id a cursor resumes after; raises :class:`InvalidCursor` for anything foreign."""
    if not isinstance(cursor, str) or not cursor:
        raise InvalidCursor(f"cursor must be a non-empty str from a previous page, got {cursor!r}")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        payload = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (binascii.Error, UnicodeError, ValueError) as exc:
        raise InvalidCursor(
            f"cursor {cursor[:40]!r} was not produced by list_executions; "
            "restart the listing without a cursor"
        ) from exc
    if (
        not isinstance(payload, dict)
        or payload.get("v") != _CURSOR_VERSION
        or not isinstance(payload.get("after"), str)
    ):
        raise InvalidCursor(
            f"cursor {cursor[:40]!r} was not produced by list_executions; "
            "restart the listing without a cursor"
        )
    after: str = payload["after"]
    try:
        check_id(after, "cursor position")
    except (TypeError, ValueError) as exc:
        raise InvalidCursor(
            f"cursor {cursor[:40]!r} was not produced by list_executions ({exc}); "
            "restart the listing without a cursor"
        ) from None
    return after


@dataclass(frozen=True, slots=True)
class ListingQuery:
    """A validated listing request."""

    statuses: frozenset[Status] | None
    definition_id: str | None
    roots_only: bool
    limit: int
    after: str | None

    @property
    def probe_limit(self) -> int:
        """How many rows to read: ``limit + 1`` (the extra row tells whether a page follows),
        capped at ``MAX_INT`` so it still binds as a 64-bit integer."""
        return min(self.limit + 1, MAX_INT)

    @property
    def matches_nothing(self) -> bool:
        """An empty status collection matches no execution."""
        return self.statuses is not None and not self.statuses

    @property
    def status_values(self) -> tuple[str, ...] | None:
        """The status filter as sorted string values (for bound parameters)."""
        if self.statuses is None:
            return None
        return tuple(sorted(status.value for status in self.statuses))

    def matches(self, summary: ExecutionSummary) -> bool:
        """Whether an execution's summary passes every filter (cursor excluded)."""
        if self.statuses is not None and summary.status not in self.statuses:
            return False
        if self.definition_id is not None and summary.definition_id != self.definition_id:
            return False
        return not (self.roots_only and summary.parent_id is not None)


def listing_query(
    *,
    status: Iterable[Status] | None,
    definition_id: str | None,
    roots_only: bool,
    limit: int,
    cursor: str | None,
) -> ListingQuery:
    """Validate listing arguments.

    ``TypeError`` for wrong types; ``InvalidArgument`` (a ``ValueError``) for a ``limit`` outside
    ``[1, MAX_INT]`` or an unknown status; ``InvalidIdentifier`` for a ``definition_id`` no
    execution can have; ``InvalidCursor`` for a foreign cursor.
    """
    limit = check_count(limit, "limit")
    statuses: frozenset[Status] | None = None
    if status is not None:
        if isinstance(status, (str, Status, bytes)) or not isinstance(status, Iterable):
            raise TypeError("status must be a collection of Status values, e.g. [Status.DONE]")
        statuses = frozenset(_status(value) for value in status)
    if definition_id is not None:
        check_id(definition_id, "definition_id filter")
    if cursor is not None and not isinstance(cursor, str):
        raise TypeError(f"cursor must be a str from a previous page or None, got {show(cursor)}")
    after = None if cursor is None else decode_cursor(cursor)
    return ListingQuery(statuses, definition_id, bool(roots_only), limit, after)


def _status(value: object) -> Status:
    if isinstance(value, Status):
        return value
    if not isinstance(value, str):
        raise TypeError(f"status values must be Status members, got {show(value)}")
    try:
        return Status(value)
    except ValueError:
        raise InvalidArgument(
            f"unknown status {show(value)}; use one of {', '.join(s.value for s in Status)}"
        ) from None


def page_from_probe(query: ListingQuery, rows: Sequence[ExecutionSummary]) -> ExecutionPage:
    """Build a page from up to ``limit + 1`` matching rows, ordered by id, after the cursor.

    The extra row only tells whether another page exists, so a cursor is never returned
    after the last page.
    """
    items = list(rows[: query.limit])
    more = len(rows) > query.limit
    return ExecutionPage(items=items, next_cursor=encode_cursor(items[-1].id) if more else None)
