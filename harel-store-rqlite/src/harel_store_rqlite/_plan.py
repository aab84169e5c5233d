"""rqlite's sans-IO plan: the SQL family's plan in rqlite's dialect, plus the open sequence.

Every operation is a generator of :class:`~harel.store.common.sql.SqlPlan` shared with SQLite
and libSQL; rqlite's dialect is data: ``?`` placeholders and no interactive transaction (a
write transaction is ONE request), so a commit is one batch whose side writes are guarded by
the ``commit_token`` its CAS wrote, and, with the unified endpoint, the lost CAS's found
version rides in the same batch.  :mod:`harel_store_rqlite._wire` turns these requests into
HTTP calls.  No driver import.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from dataclasses import replace
from typing import Any

from harel.store.author.sql import RQLITE, Dialect, Rendered, SqlPlan
from harel.store.errors import StoreConfigError

from harel_store_rqlite._options import RqliteOptions
from harel_store_rqlite._spec import DISTRIBUTION
from harel_store_rqlite._wire import READY, VERIFY, Request

DIALECT: Dialect = RQLITE
"""``?`` placeholders, single-request transactions, reads allowed in a batch (/db/request)."""

EXECUTE_ONLY: Dialect = replace(RQLITE, name="rqlite (no unified endpoint)", batch_reads=False)
"""For servers without ``/db/request``: batches hold writes only (``/db/execute``)."""


def rqlite_plan(options: RqliteOptions) -> SqlPlan:
    """The plan of the node ``options`` names (documents up to the shared 16 MiB limit)."""
    dialect = DIALECT if options.unified else EXECUTE_ONLY
    return SqlPlan(dialect, where=options.where, distribution=DISTRIBUTION)


LINEARIZABLE_SINCE = (8, 32, 2)
"""The first rqlite release whose ``linearizable`` reads follow the Raft dissertation (§6.4);
older nodes read an unknown level as ``weak``, silently."""
_NOT_VERIFIED = frozenset({"ddl", "upgrades", "record_version", "tables_probe", "version_probe"})
"""Statements of the plan not checked at open: the schema's own (they run before the check)."""


def verified_statements(plan: SqlPlan) -> tuple[tuple[str, int], ...]:
    """``(sql, parameter count)`` of every statement the plan sends once the schema is ready
    (the open sequence checks that each prepares on the node's database)."""
    found: dict[str, int] = {}
    for name, value in vars(plan.sql).items():
        if name in _NOT_VERIFIED:
            continue
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            rendered = item[1] if isinstance(item, tuple) and len(item) == 2 else item
            if isinstance(rendered, Rendered):
                found.setdefault(rendered.sql, len(rendered.slots))
    return tuple(found.items())


def cas_forms(plan: SqlPlan) -> dict[str, tuple[int, int]]:
    """Every CAS text of the plan that writes the single-request owner token (``INSERT INTO
    executions`` / ``UPDATE executions``), with the positions of its ``id`` and ``token``
    parameters (see :data:`~harel_store_rqlite._wire.DISARM_SQL`)."""
    forms: dict[str, tuple[int, int]] = {}
    for value in vars(plan.sql).values():
        for item in value if isinstance(value, tuple) else (value,):
            if not isinstance(item, Rendered) or not {"id", "token"} <= set(item.slots):
                continue
            if item.sql.startswith(("INSERT INTO executions ", "UPDATE executions SET ")):
                forms[item.sql] = (item.slots.index("id"), item.slots.index("token"))
    return forms


def version_of(header: str | None) -> tuple[int, int, int] | None:
    """``(8, 36, 0)`` of an ``X-RQLITE-VERSION`` of ``v8.36.0`` (``None``: no release)."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?", (header or "").strip())
    if match is None:
        return None
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def check_levels(options: RqliteOptions, header: str | None) -> None:
    """Refuse ``linearizable`` (``level`` or ``sweep_level``) on a node that would read it as
    ``weak`` (older than 8.32.2, or not telling its version): :class:`StoreConfigError`."""
    if "linearizable" not in (options.level, options.sweep_level):
        return
    version = version_of(header)
    if version is None or version < LINEARIZABLE_SINCE:
        shown = "no version" if header is None else f"version {header.strip()[:40]!r}"
        raise StoreConfigError(
            f"{options.where} reports {shown}; linearizable reads need rqlite 8.32.2 or newer "
            "(an older node reads an unknown level as weak, silently): upgrade the cluster or "
            "use level=strong"
        )


def open_store(plan: SqlPlan, now: float, options: RqliteOptions) -> Generator[Request, Any, None]:
    """Opening: ask ``/readyz`` (a node without a leader fails here with ``StoreUnavailable``,
    which ``from_url`` retries; a user without the ``ready`` permission skips it) and check
    that the node knows the configured levels, then check / create / upgrade the schema
    (``now`` dates the marks of an upgraded database), then check that every statement the
    store sends prepares on it (:data:`~harel_store_rqlite._wire.VERIFY`)."""
    check_levels(options, (yield READY))
    yield from plan.open_schema(now)
    yield VERIFY
