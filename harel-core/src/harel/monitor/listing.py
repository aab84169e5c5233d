"""The executions list's query string: filters, page size and cursor, checked.

One parser for the list page and its live endpoint, so both read the same page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from harel.model import ExecutionPage, Status
from harel.monitor.errors import PageError
from harel.store.contract import ExecutionStore

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


def page_limit(query: Mapping[str, str], default: int) -> int:
    """The query string's ``limit`` (``default`` when absent): a whole number in
    1..:data:`MAX_LIMIT`, else :class:`PageError` (400)."""
    limit_text = query.get("limit", "").strip()
    try:
        limit = int(limit_text) if limit_text else default
    except ValueError:
        raise PageError(400, "Bad limit", "limit must be a whole number") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise PageError(400, "Bad limit", f"limit must be between 1 and {MAX_LIMIT}")
    return limit


@dataclass(frozen=True)
class ListingQuery:
    """One page of the listing: ``status`` (``None``: any), ``definition_id`` (``None``: all),
    ``roots_only``, ``limit`` (1..:data:`MAX_LIMIT`) and the keyset ``cursor``."""

    status: Status | None = None
    definition_id: str | None = None
    roots_only: bool = False
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> ListingQuery:
        """Read the query string; PageError (400) for a bad status or limit."""
        status_text = query.get("status", "").strip()
        try:
            status = Status(status_text.upper()) if status_text else None
        except ValueError:
            choices = ", ".join(item.value for item in Status)
            raise PageError(400, "Bad status", f"status must be one of {choices}") from None
        limit = page_limit(query, DEFAULT_LIMIT)
        return cls(
            status=status,
            definition_id=query.get("definition", "").strip() or None,
            roots_only=query.get("roots", "") in {"1", "on", "true", "yes"},
            limit=limit,
            cursor=query.get("cursor") or None,
        )

    def fetch(self, store: ExecutionStore) -> ExecutionPage:
        """This page, read through ``list_executions``."""
        return store.list_executions(
            status=None if self.status is None else [self.status],
            definition_id=self.definition_id,
            roots_only=self.roots_only,
            limit=self.limit,
            cursor=self.cursor,
        )

    def query_string(self, *, cursor: str | None = None) -> str:
        """These filters (and ``cursor``) as a query string, defaults left out."""
        pairs: list[tuple[str, str]] = []
        if self.definition_id is not None:
            pairs.append(("definition", self.definition_id))
        if self.status is not None:
            pairs.append(("status", self.status.value))
        if self.roots_only:
            pairs.append(("roots", "1"))
        if self.limit != DEFAULT_LIMIT:
            pairs.append(("limit", str(self.limit)))
        if cursor is not None:
            pairs.append(("cursor", cursor))
        return urlencode(pairs)
