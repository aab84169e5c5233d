"""Opening a schema: create the layout, upgrade an older one in place, or refuse a newer one.

The verdict is :func:`harel.store.author.schema_verdict`'s.  A schema at the current version
costs two probes and writes nothing; so does a refused one (a newer layout, one older than any
upgrade, or a foreign one: an ``executions`` table without the version table), before anything
is written.  Creating or upgrading runs in one transaction that
holds the schema's advisory lock: openers arriving together wait there, the first does the
work, the others probe again under the lock, find the current version and write nothing.  An
upgrade from before version 4 ends with :data:`~harel_store_postgres._schema.BACKFILL_TO_4` in
the same transaction: the work rows of the timers, outbox entries and spawn intents the older
layout holds (a version-4 schema keeps them already: its upgrade only replaces
``harel_commit``).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

from harel.store.author import relay_due, schema_verdict
from harel.store.author.sql import Result, Statement
from harel.store.errors import SchemaVersionError, StoreCorrupted

from harel_store_postgres import _schema
from harel_store_postgres._rows import first_row
from harel_store_postgres._spec import DISTRIBUTION

Plan = Generator[Statement, Result, Any]


def open_schema(schema: str, where: str, now: float | None = None) -> Plan:
    """Make sure ``schema`` holds the current layout (see the module's docstring); an
    upgrade also writes the work rows of what the older layout holds (``now``: the upgrade
    time, default this process's clock)."""
    verdict, found = yield from _verdict(schema, where)
    if verdict == "ready":
        return
    yield Statement(_schema.BEGIN)
    yield Statement(_schema.LOCK, (_schema.ADVISORY_LOCK_CLASS, schema))
    verdict, found = yield from _verdict(schema, where)
    if verdict != "ready":
        steps = _schema.DDL if verdict == "create" else _schema.UPGRADES[int(found or 0)]
        for ddl in steps:
            yield Statement(ddl)
        if verdict == "upgrade" and int(found or 0) < _schema.BACKFILLED_BELOW:
            at = relay_due(time.time() if now is None else now)  # it ran version 4's step
            yield Statement(_schema.BACKFILL_TO_4, (at, at))
        yield Statement(_schema.RECORD_VERSION, (_schema.SCHEMA_VERSION, _schema.written_by()))
    yield Statement(_schema.COMMIT)


def _verdict(schema: str, where: str) -> Generator[Statement, Result, tuple[str, int | None]]:
    found, writer = yield from probe(schema)
    verdict = schema_verdict(
        found,
        current=_schema.SCHEMA_VERSION,
        upgrades=_schema.UPGRADES,
        where=where,
        distribution=DISTRIBUTION,
        written_by=writer,
    )
    return verdict, found


def probe(schema: str) -> Generator[Statement, Result, tuple[int | None, str | None]]:
    """The stored layout version and writer (``None`` for a schema without the version row:
    fresh, or half made)."""
    if not first_row((yield Statement(_schema.EXISTS_PROBE, (schema,))))[0]:
        if first_row((yield Statement(_schema.FOREIGN_PROBE, (schema,))))[0]:
            raise SchemaVersionError(
                f"schema {schema!r} has an executions table but no harel_schema version table: "
                "it was written by another application or by the reference implementation, "
                "which this store cannot read (see docs/porting.md); use another ?schema="
            )
        return None, None
    row = (yield Statement(_schema.VERSION_PROBE)).first
    if row is None:
        return None, None
    document = row[0]
    if not isinstance(document, dict) or not isinstance(document.get("version"), int):
        raise StoreCorrupted(f"the harel_schema row of {schema!r} is damaged: {document!r}")
    writer = document.get("written_by")
    return int(document["version"]), writer if isinstance(writer, str) else None
