"""The keyset listing statement of the PostgreSQL store and how its rows become summaries.

Every filter is a bound parameter on a broken-out column; the only generated SQL is the choice
among fixed clauses.  Several statuses become one index-ordered arm per status, merged by id,
so a page costs ``O(limit)`` rows whatever the table holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harel.model import ExecutionSummary
from harel.store.author import MAX_INT, ListingQuery
from harel.store.author.sql import Statement
from harel.store.errors import StoreCorrupted

_SUMMARY_FIELDS = tuple(ExecutionSummary.model_fields)
"""The summary's fields, which are also the names of their columns."""

_SUMMARY_COLUMNS = ", ".join(_SUMMARY_FIELDS)


def listing_statement(query: ListingQuery) -> Statement:
    """The keyset probe (``limit + 1`` rows after the cursor's id, ordered by id) of a
    validated listing query (also used by the EXPLAIN tests)."""
    clauses: list[str] = []
    params: list[Any] = []
    if query.after is not None:
        clauses.append("id > %s")
        params.append(query.after)
    if query.definition_id is not None:
        clauses.append("definition_id = %s")
        params.append(query.definition_id)
    if query.roots_only:
        clauses.append("parent_id IS NULL")
    probe = min(query.limit + 1, MAX_INT)
    statuses = query.status_values
    if statuses is None or len(statuses) == 1:
        if statuses is not None:
            clauses.append("status = %s")
            params.append(statuses[0])
        return Statement(_select_page(clauses), (*params, probe))
    arm = f"({_select_page([*clauses, 'status = %s'])})"
    sql = " UNION ALL ".join([arm] * len(statuses)) + " ORDER BY id LIMIT %s::bigint"
    arm_params = [value for status in statuses for value in (*params, status, probe)]
    return Statement(sql, (*arm_params, probe))


def _select_page(clauses: Sequence[str]) -> str:
    """One keyset probe over ``executions``; ``clauses`` are fixed texts with ``%s`` only."""
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    return (
        f"SELECT {_SUMMARY_COLUMNS} FROM {{schema}}.executions{where} "  # noqa: S608
        "ORDER BY id LIMIT %s::bigint"
    )


def summary(row: Sequence[Any]) -> ExecutionSummary:
    """The summary of one listed row (damaged columns: ``StoreCorrupted``)."""
    try:
        return ExecutionSummary.model_validate(dict(zip(_SUMMARY_FIELDS, row, strict=True)))
    except ValueError as exc:
        raise StoreCorrupted(
            f"the summary columns of execution {row[0]!r} are damaged ({str(exc)[:200]}); "
            "restore the row from a backup or purge it"
        ) from exc
