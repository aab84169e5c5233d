"""Counts of executions by status, bounded: the contract has no count, so count by paging.

Each status is counted through ``list_executions`` pages until :data:`COUNT_BOUND` is passed;
a count that reached it is shown as ``10,000+``.  The work is therefore at most
``COUNT_BOUND + 1`` summaries per status, whatever the store holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from harel.model import Status
from harel.store.contract import ExecutionStore

COUNT_BOUND = 10_000
"""Counting stops past this many executions of one status."""

COUNT_PAGE = 2_500
"""Summaries per listing page while counting."""


@dataclass(frozen=True)
class StatusCount:
    """How many executions have ``status``: ``count``, or at least that many when ``capped``."""

    status: Status
    count: int
    capped: bool

    @property
    def label(self) -> str:
        """``1,234``, or ``10,000+`` when the count stopped at the bound."""
        return f"{self.count:,}+" if self.capped else f"{self.count:,}"


def count_status(
    store: ExecutionStore,
    status: Status,
    *,
    definition_id: str | None,
    roots_only: bool,
    bound: int = COUNT_BOUND,
) -> StatusCount:
    """The executions of one status under the filter, counted up to ``bound``."""
    seen = 0
    cursor: str | None = None
    while True:
        page = store.list_executions(
            status=[status],
            definition_id=definition_id,
            roots_only=roots_only,
            limit=min(COUNT_PAGE, bound + 1 - seen),
            cursor=cursor,
        )
        seen += len(page.items)
        cursor = page.next_cursor
        if seen > bound:
            return StatusCount(status, bound, True)
        if cursor is None:
            return StatusCount(status, seen, False)


def count_by_status(
    store: ExecutionStore,
    *,
    definition_id: str | None,
    roots_only: bool,
    bound: int = COUNT_BOUND,
) -> list[StatusCount]:
    """One bounded count per status, in the enum's order (zero counts included)."""
    return [
        count_status(store, status, definition_id=definition_id, roots_only=roots_only, bound=bound)
        for status in Status
    ]
