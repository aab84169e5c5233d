"""The PostgreSQL layout: tables, indexes, server-side functions, the schema-version row.

Every text here is a template whose only slot, ``{schema}``, the driver fills with the schema
name quoted by ``psycopg.sql.Identifier``; values always travel as bound parameters (``%s``).
Function bodies name tables unqualified: each function pins ``search_path`` to its schema, so
the quoted name never appears inside a dollar-quoted body.

Opening a schema is :func:`open_schema` (the shared open flow with :class:`PostgresOpen`'s
steps): create the layout, upgrade an older one in place, or refuse a newer one.

Layout version 5, in the configured schema:

* ``executions`` — one row per execution: ``data`` (the codec's JSON, as ``text``: ``jsonb``
  would reorder keys, turn ``-0.0`` into ``0`` and refuse ``NaN``), the summary columns
  ``definition_id``, ``status``, ``outcome``, ``active_path``, ``parent_id``, ``updated_at``,
  the CAS ``version`` and ``receipts``, the ring of commit tokens (:data:`RECEIPT_SLOTS`
  slots, ``text[]`` indexed by ``version % 8 + 1``) that tells a re-sent commit it was already
  stored.  Key columns use the ``"C"`` collation, so ``ORDER BY id`` is code
  point order (Python's) and keyset cursors agree with every other backend.
* ``outbox`` / ``spawns`` — relay queues keyed by an identity ``seq``.
* ``processed_events`` — dedupe marks ``(execution_id, event_id)`` with ``processed_at``.
* ``timers`` — one armed timer per ``(execution_id, path)``; ``fire_at`` is ``double
  precision``, which holds every float bit-exactly (``-0.0`` and subnormals included).
* ``trace`` — the ring of steps per execution, keyed by ``(execution_id, idx)``.
* ``work`` — one row per group of due work (claims): ``key`` (the execution id, or
  :data:`UNTARGETED` for the untargeted outbox entries), ``priority``, ``ready_at``, ``owner``.
* ``harel_schema`` — one row holding the layout version and ``written_by``, the release that
  wrote it (``harel-store-postgres 0.1.0``).

Version 2 is version 1 plus :data:`UPGRADE_TO_2`: the ``written_by`` column and the
``harel_import`` function (``import_execution``).  Version 3 is version 2 plus
:data:`UPGRADE_TO_3`: the ``receipts`` column (``NULL`` in rows written before: no receipt,
which only means an older commit re-sent gets ``StoreConflict`` as it did) and ``harel_commit``
taking the commit token and returning the receipt a lost CAS found.  Version 4 is version 3
plus :data:`UPGRADE_TO_4`: the ``work`` table, ordered relay indexes, ``harel_commit`` /
``harel_import`` taking the work touches of their write (their older texts extended, not
copied), ``harel_purge`` deleting the work row, and ``harel_claim`` / ``harel_renew`` /
``harel_release`` (the writes that touch work rows also ``pg_notify`` the schema's
wake-up channel, :data:`WAKE_CHANNEL_SQL`); an upgrade to it ends with
:data:`BACKFILL_TO_4`.  Version 5 is version 4 plus :data:`UPGRADE_TO_5`: ``harel_commit``
checks the commit's dedupe mark and fence in its CAS (one signature, taking the fence; a lost
CAS also returns whether the mark is held).  Creating a schema runs :data:`V1_DDL` then every
upgrade step; opening an older schema runs the steps from its version alone (each is
idempotent).

Indexes: one per sweep (``timers_due`` on ``(fire_at, execution_id, path)``; the ``seq``
primary keys of ``outbox`` and ``spawns``), one per listing filter (``executions_definition``,
``executions_definition_status``, ``executions_status``, ``executions_roots``,
``executions_roots_status``, all ending in ``id`` for keyset order), ``processed_age`` for
``prune_processed``, ``work_ready`` on ``(priority, ready_at, key)`` for the claim's tier
reads, and ``outbox_target_seq`` / ``spawns_parent_seq`` (version 4's ordered replacements of
version 1's hash indexes) for a claim's group in ``seq`` order, ``purge`` and export.
"""

from __future__ import annotations

# ruff: noqa: S608 - version 4's texts are composed of fixed fragments; values are slots only
import time

from harel.store.author import (
    RECEIPT_WINDOW,
    OpenSteps,
    Step,
    Stored,
    open_flow,
    relay_due,
    release_of,
)
from harel.store.author.sql import Statement
from harel.store.errors import SchemaVersionError, StoreCorrupted

from harel_store_postgres._rows import first_row
from harel_store_postgres._spec import DISTRIBUTION

SCHEMA_VERSION = 5
"""The layout version this release reads and writes."""

ADVISORY_LOCK_CLASS = 7723019
"""First key of ``pg_advisory_xact_lock(class, hashtext(schema))``: one lock per schema."""

EXISTS_PROBE = "SELECT to_regclass(format('%%I.harel_schema', %s::text)) IS NOT NULL"
"""Whether the schema-version table exists (the schema name is a bound value here)."""

FOREIGN_PROBE = "SELECT to_regclass(format('%%I.executions', %s::text)) IS NOT NULL"
"""Whether an ``executions`` table exists (asked when there is no version table: a schema
that has one without the other was written by another application)."""

VERSION_PROBE = "SELECT to_jsonb(s) FROM {schema}.harel_schema AS s"
"""The version row as JSON: reads every layout's row, whatever columns it has."""

LOCK = "SELECT pg_advisory_xact_lock(%s, hashtext(%s::text))"

BEGIN = "BEGIN"
COMMIT = "COMMIT"

RECORD_VERSION = (
    "INSERT INTO {schema}.harel_schema (singleton, version, written_by) VALUES (true, %s, %s) "
    "ON CONFLICT (singleton) DO UPDATE "
    "SET version = excluded.version, written_by = excluded.written_by"
)


def written_by() -> str:
    """What this release records as the writer of a layout (``harel-store-postgres 0.1.0``)."""
    return release_of(DISTRIBUTION)


_TABLES: tuple[str, ...] = (
    "CREATE SCHEMA IF NOT EXISTS {schema}",
    """CREATE TABLE IF NOT EXISTS {schema}.harel_schema (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        version integer NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS {schema}.executions (
        id text COLLATE "C" PRIMARY KEY,
        definition_id text COLLATE "C" NOT NULL,
        status text COLLATE "C" NOT NULL,
        outcome text,
        active_path text,
        parent_id text COLLATE "C",
        version bigint NOT NULL,
        updated_at double precision NOT NULL,
        data text NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS {schema}.outbox (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        target_id text COLLATE "C",
        event text NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS {schema}.spawns (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        parent_id text COLLATE "C" NOT NULL,
        child_id text NOT NULL,
        root_path text NOT NULL,
        context text NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS {schema}.processed_events (
        execution_id text COLLATE "C" NOT NULL,
        event_id text COLLATE "C" NOT NULL,
        processed_at double precision NOT NULL,
        PRIMARY KEY (execution_id, event_id)
    )""",
    """CREATE TABLE IF NOT EXISTS {schema}.timers (
        execution_id text COLLATE "C" NOT NULL,
        path text COLLATE "C" NOT NULL,
        fire_at double precision NOT NULL,
        PRIMARY KEY (execution_id, path)
    )""",
    """CREATE TABLE IF NOT EXISTS {schema}.trace (
        execution_id text COLLATE "C" NOT NULL,
        idx bigint NOT NULL,
        entry text NOT NULL,
        PRIMARY KEY (execution_id, idx)
    )""",
)

_INDEXES: tuple[str, ...] = (
    "CREATE INDEX IF NOT EXISTS executions_definition ON {schema}.executions (definition_id, id)",
    "CREATE INDEX IF NOT EXISTS executions_definition_status "
    "ON {schema}.executions (definition_id, status, id)",
    "CREATE INDEX IF NOT EXISTS executions_status ON {schema}.executions (status, id)",
    "CREATE INDEX IF NOT EXISTS executions_roots ON {schema}.executions (id) "
    "WHERE parent_id IS NULL",
    "CREATE INDEX IF NOT EXISTS executions_roots_status ON {schema}.executions (status, id) "
    "WHERE parent_id IS NULL",
    "CREATE INDEX IF NOT EXISTS timers_due ON {schema}.timers (fire_at, execution_id, path)",
    "CREATE INDEX IF NOT EXISTS processed_age ON {schema}.processed_events (processed_at)",
    "CREATE INDEX IF NOT EXISTS outbox_target ON {schema}.outbox USING hash (target_id)",
    "CREATE INDEX IF NOT EXISTS spawns_parent ON {schema}.spawns USING hash (parent_id)",
)

_FUNCTIONS: tuple[str, ...] = (
    # The next step of an execution's trace ring: index MAX(idx) + 1 (contiguous), then the
    # rows that fell out of the last ``p_trace_max`` are deleted (0 = keep everything).
    # Callers hold the execution's row lock, so concurrent appends cannot pick the same index.
    """CREATE OR REPLACE FUNCTION {schema}.harel_trace_append(
        p_id text, p_entry text, p_trace_max bigint
    ) RETURNS void
    LANGUAGE plpgsql SET search_path = {schema}, pg_temp AS $harel$
    DECLARE
        v_idx bigint;
    BEGIN
        SELECT coalesce(max(t.idx), -1) + 1 INTO v_idx FROM trace AS t WHERE t.execution_id = p_id;
        INSERT INTO trace (execution_id, idx, entry) VALUES (p_id, v_idx, p_entry);
        IF p_trace_max > 0 THEN
            DELETE FROM trace AS t WHERE t.execution_id = p_id AND t.idx <= v_idx - p_trace_max;
        END IF;
    END
    $harel$""",
    # One whole commit, one statement, one round trip.  The CAS is an INSERT ... ON CONFLICT
    # DO NOTHING (version 0) or an UPDATE guarded by the version: both wait for a concurrent
    # writer of the row and then see its result, so a lost race changes no row.  Then
    # ``o_found`` is read by a new statement (a new snapshot under READ COMMITTED), which sees
    # the winner, and the function returns without writing anything else.
    """CREATE OR REPLACE FUNCTION {schema}.harel_commit(
        p_id text, p_definition_id text, p_status text, p_outcome text,
        p_active_path text, p_parent_id text, p_data text, p_old bigint,
        p_committed_at double precision, p_event_id text,
        p_emit_targets text[], p_emit_events text[],
        p_spawn_children text[], p_spawn_roots text[], p_spawn_contexts text[],
        p_schedule_paths text[], p_schedule_fire_at double precision[],
        p_cancel_paths text[], p_trace text, p_trace_max bigint,
        OUT o_applied boolean, OUT o_found bigint
    )
    LANGUAGE plpgsql SET search_path = {schema}, pg_temp AS $harel$
    BEGIN
        IF p_old = 0 THEN
            INSERT INTO executions (id, definition_id, status, outcome, active_path, parent_id,
                                    version, updated_at, data)
            VALUES (p_id, p_definition_id, p_status, p_outcome, p_active_path, p_parent_id,
                    1, p_committed_at, p_data)
            ON CONFLICT (id) DO NOTHING;
        ELSE
            UPDATE executions
            SET definition_id = p_definition_id, status = p_status, outcome = p_outcome,
                active_path = p_active_path, parent_id = p_parent_id, version = p_old + 1,
                updated_at = p_committed_at, data = p_data
            WHERE id = p_id AND version = p_old;
        END IF;
        IF NOT FOUND THEN
            o_applied := false;
            SELECT e.version INTO o_found FROM executions AS e WHERE e.id = p_id;
            RETURN;
        END IF;
        o_applied := true;
        o_found := p_old + 1;
        FOR i IN 1 .. coalesce(array_length(p_emit_events, 1), 0) LOOP
            INSERT INTO outbox (target_id, event) VALUES (p_emit_targets[i], p_emit_events[i]);
        END LOOP;
        IF p_event_id IS NOT NULL THEN
            INSERT INTO processed_events (execution_id, event_id, processed_at)
            VALUES (p_id, p_event_id, p_committed_at)
            ON CONFLICT (execution_id, event_id) DO NOTHING;
        END IF;
        FOR i IN 1 .. coalesce(array_length(p_spawn_children, 1), 0) LOOP
            INSERT INTO spawns (parent_id, child_id, root_path, context)
            VALUES (p_id, p_spawn_children[i], p_spawn_roots[i], p_spawn_contexts[i]);
        END LOOP;
        IF cardinality(p_cancel_paths) > 0 THEN
            DELETE FROM timers AS t WHERE t.execution_id = p_id AND t.path = ANY (p_cancel_paths);
        END IF;
        IF cardinality(p_schedule_paths) > 0 THEN
            INSERT INTO timers (execution_id, path, fire_at)
            SELECT p_id, s.path, s.fire_at
            FROM unnest(p_schedule_paths, p_schedule_fire_at) AS s (path, fire_at)
            ON CONFLICT (execution_id, path) DO UPDATE SET fire_at = excluded.fire_at;
        END IF;
        IF p_trace IS NOT NULL THEN
            PERFORM harel_trace_append(p_id, p_trace, p_trace_max);
        END IF;
    END
    $harel$""",
    # append_trace outside a commit: locks the execution's row (serialising with commits of
    # it) and appends; false when the execution is not stored (nothing written).
    """CREATE OR REPLACE FUNCTION {schema}.harel_append_trace(
        p_id text, p_entry text, p_trace_max bigint
    ) RETURNS boolean
    LANGUAGE plpgsql SET search_path = {schema}, pg_temp AS $harel$
    BEGIN
        PERFORM 1 FROM executions AS e WHERE e.id = p_id FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            RETURN false;
        END IF;
        PERFORM harel_trace_append(p_id, p_entry, p_trace_max);
        RETURN true;
    END
    $harel$""",
    # purge: the execution and everything it owns, in one statement (one transaction).  An
    # unfinished execution is left alone unless p_force; o_status then tells why.
    """CREATE OR REPLACE FUNCTION {schema}.harel_purge(
        p_id text, p_force boolean, p_finished text[],
        OUT o_existed boolean, OUT o_purged boolean, OUT o_status text
    )
    LANGUAGE plpgsql SET search_path = {schema}, pg_temp AS $harel$
    BEGIN
        SELECT e.status INTO o_status FROM executions AS e WHERE e.id = p_id FOR UPDATE;
        o_existed := FOUND;
        IF o_existed AND NOT p_force AND NOT (o_status = ANY (p_finished)) THEN
            o_purged := false;
            RETURN;
        END IF;
        DELETE FROM processed_events AS p WHERE p.execution_id = p_id;
        DELETE FROM timers AS t WHERE t.execution_id = p_id;
        DELETE FROM outbox AS o WHERE o.target_id = p_id;
        DELETE FROM spawns AS s WHERE s.parent_id = p_id;
        DELETE FROM trace AS t WHERE t.execution_id = p_id;
        DELETE FROM executions AS e WHERE e.id = p_id;
        o_purged := true;
    END
    $harel$""",
)

V1_DDL: tuple[str, ...] = _TABLES + _INDEXES + _FUNCTIONS
"""Every statement that creates layout version 1, in order; each is idempotent."""

UPGRADE_TO_2: tuple[str, ...] = (
    "ALTER TABLE {schema}.harel_schema ADD COLUMN IF NOT EXISTS written_by text",
    # import_execution: one record in one statement.  The execution (when the record has one)
    # is inserted only if absent: false, and nothing written, when it is already stored.
    # Marks, timers and trace keep the record's times and indices; relays get new seqs in
    # record order, after every existing one.
    """CREATE OR REPLACE FUNCTION {schema}.harel_import(
        p_id text, p_has_execution boolean, p_definition_id text, p_status text,
        p_outcome text, p_active_path text, p_parent_id text, p_version bigint,
        p_updated_at double precision, p_data text,
        p_event_ids text[], p_processed_at double precision[],
        p_timer_paths text[], p_timer_fire_at double precision[],
        p_emit_targets text[], p_emit_events text[],
        p_spawn_children text[], p_spawn_roots text[], p_spawn_contexts text[],
        p_trace_idx bigint[], p_trace_entries text[]
    ) RETURNS boolean
    LANGUAGE plpgsql SET search_path = {schema}, pg_temp AS $harel$
    BEGIN
        IF p_has_execution THEN
            INSERT INTO executions (id, definition_id, status, outcome, active_path, parent_id,
                                    version, updated_at, data)
            VALUES (p_id, p_definition_id, p_status, p_outcome, p_active_path, p_parent_id,
                    p_version, p_updated_at, p_data)
            ON CONFLICT (id) DO NOTHING;
            IF NOT FOUND THEN
                RETURN false;
            END IF;
            INSERT INTO processed_events (execution_id, event_id, processed_at)
            SELECT p_id, m.event_id, m.at
            FROM unnest(p_event_ids, p_processed_at) AS m (event_id, at)
            ON CONFLICT (execution_id, event_id) DO UPDATE SET processed_at = excluded.processed_at;
            INSERT INTO timers (execution_id, path, fire_at)
            SELECT p_id, t.path, t.fire_at
            FROM unnest(p_timer_paths, p_timer_fire_at) AS t (path, fire_at)
            ON CONFLICT (execution_id, path) DO UPDATE SET fire_at = excluded.fire_at;
            FOR i IN 1 .. coalesce(array_length(p_spawn_children, 1), 0) LOOP
                INSERT INTO spawns (parent_id, child_id, root_path, context)
                VALUES (p_id, p_spawn_children[i], p_spawn_roots[i], p_spawn_contexts[i]);
            END LOOP;
            INSERT INTO trace (execution_id, idx, entry)
            SELECT p_id, s.idx, s.entry
            FROM unnest(p_trace_idx, p_trace_entries) AS s (idx, entry)
            ON CONFLICT (execution_id, idx) DO UPDATE SET entry = excluded.entry;
        END IF;
        FOR i IN 1 .. coalesce(array_length(p_emit_events, 1), 0) LOOP
            INSERT INTO outbox (target_id, event) VALUES (p_emit_targets[i], p_emit_events[i]);
        END LOOP;
        RETURN true;
    END
    $harel$""",
)
"""From version 1 to 2; idempotent, run under the schema's advisory lock."""

RECEIPT_SLOTS = RECEIPT_WINDOW
"""Slots of the ``receipts`` ring: version ``v``'s token is ``receipts[v % 8 + 1]``."""

UPGRADE_TO_3: tuple[str, ...] = (
    "ALTER TABLE {schema}.executions ADD COLUMN IF NOT EXISTS receipts text[]",
    # The version-2 signature goes: one harel_commit per schema, the one that keeps receipts.
    "DROP FUNCTION IF EXISTS {schema}.harel_commit(text, text, text, text, text, text, text, "
    "bigint, double precision, text, text[], text[], text[], text[], text[], text[], "
    "double precision[], text[], text, bigint)",
    # One whole commit, one statement, one round trip.  The CAS is an INSERT ... ON CONFLICT
    # DO NOTHING (version 0) or an UPDATE guarded by the version: both wait for a concurrent
    # writer of the row and then see its result, so a lost race changes no row.  The winning
    # write stores p_token as the receipt of the new version (slot p_slot of the ring).  A lost
    # CAS reads, in a new statement (a new snapshot under READ COMMITTED, which sees the
    # winner), the stored version and the receipt in p_slot, and returns them without writing
    # anything: the caller tells from them whether this very commit was stored already.
    """CREATE OR REPLACE FUNCTION {schema}.harel_commit(
        p_id text, p_definition_id text, p_status text, p_outcome text,
        p_active_path text, p_parent_id text, p_data text, p_old bigint,
        p_committed_at double precision, p_event_id text,
        p_emit_targets text[], p_emit_events text[],
        p_spawn_children text[], p_spawn_roots text[], p_spawn_contexts text[],
        p_schedule_paths text[], p_schedule_fire_at double precision[],
        p_cancel_paths text[], p_trace text, p_trace_max bigint,
        p_token text, p_slot integer,
        OUT o_applied boolean, OUT o_found bigint, OUT o_receipt text
    )
    LANGUAGE plpgsql SET search_path = {schema}, pg_temp AS $harel$
    DECLARE
        v_receipts text[];
    BEGIN
        IF p_old = 0 THEN
            v_receipts[p_slot] := p_token;
            INSERT INTO executions (id, definition_id, status, outcome, active_path, parent_id,
                                    version, updated_at, data, receipts)
            VALUES (p_id, p_definition_id, p_status, p_outcome, p_active_path, p_parent_id,
                    1, p_committed_at, p_data, v_receipts)
            ON CONFLICT (id) DO NOTHING;
        ELSE
            UPDATE executions
            SET definition_id = p_definition_id, status = p_status, outcome = p_outcome,
                active_path = p_active_path, parent_id = p_parent_id, version = p_old + 1,
                updated_at = p_committed_at, data = p_data, receipts[p_slot] = p_token
            WHERE id = p_id AND version = p_old;
        END IF;
        IF NOT FOUND THEN
            o_applied := false;
            SELECT e.version, e.receipts[p_slot] INTO o_found, o_receipt
            FROM executions AS e WHERE e.id = p_id;
            RETURN;
        END IF;
        o_applied := true;
        o_found := p_old + 1;
        FOR i IN 1 .. coalesce(array_length(p_emit_events, 1), 0) LOOP
            INSERT INTO outbox (target_id, event) VALUES (p_emit_targets[i], p_emit_events[i]);
        END LOOP;
        IF p_event_id IS NOT NULL THEN
            INSERT INTO processed_events (execution_id, event_id, processed_at)
            VALUES (p_id, p_event_id, p_committed_at)
            ON CONFLICT (execution_id, event_id) DO NOTHING;
        END IF;
        FOR i IN 1 .. coalesce(array_length(p_spawn_children, 1), 0) LOOP
            INSERT INTO spawns (parent_id, child_id, root_path, context)
            VALUES (p_id, p_spawn_children[i], p_spawn_roots[i], p_spawn_contexts[i]);
        END LOOP;
        IF cardinality(p_cancel_paths) > 0 THEN
            DELETE FROM timers AS t WHERE t.execution_id = p_id AND t.path = ANY (p_cancel_paths);
        END IF;
        IF cardinality(p_schedule_paths) > 0 THEN
            INSERT INTO timers (execution_id, path, fire_at)
            SELECT p_id, s.path, s.fire_at
            FROM unnest(p_schedule_paths, p_schedule_fire_at) AS s (path, fire_at)
            ON CONFLICT (execution_id, path) DO UPDATE SET fire_at = excluded.fire_at;
        END IF;
        IF p_trace IS NOT NULL THEN
            PERFORM harel_trace_append(p_id, p_trace, p_trace_max);
        END IF;
    END
    $harel$""",
)
"""From version 2 to 3 (commit receipts); idempotent, run under the schema's advisory lock."""

# -- version 4: claims ------------------------------------------------------------------------


def _created(steps: tuple[str, ...], name: str) -> str:
    """The one statement of ``steps`` that creates the function ``name``."""
    head = "CREATE OR REPLACE FUNCTION {schema}." + name + "("
    (found,) = [step for step in steps if step.startswith(head)]
    return found


def _extended(function: str, *edits: tuple[str, str]) -> str:
    """``function`` with each ``(anchor, replacement)`` applied; every anchor must occur
    exactly once (so an edit of the older text fails here, at import, not on a server)."""
    for anchor, replacement in edits:
        if function.count(anchor) != 1:
            raise RuntimeError(f"layout text: anchor {anchor!r} is not unique")
        function = function.replace(anchor, replacement)
    return function


WORK_PARAMS = (
    "p_work_keys text[], p_work_due double precision[], p_work_priority integer[], "
    "p_work_own boolean[]"
)
"""The four parallel arrays of work touches ``harel_commit`` and ``harel_import`` take."""


def wake_channel_sql(schema_name: str) -> str:
    """The wake-up channel of the schema named by the SQL text expression ``schema_name``, as
    SQL (:func:`harel_store_postgres._wake.channel` computes the same name in Python)."""
    return (
        "'harel_wake_' || left(encode(sha256(convert_to(" + schema_name + ", 'UTF8')), 'hex'), 32)"
    )


WAKE_CHANNEL_SQL = wake_channel_sql("current_schema()")
"""The schema's wake-up channel as the functions compute it (their ``search_path`` starts with
the schema, so ``current_schema()`` is its name): :func:`harel_store_postgres._wake.channel`
computes the same name in Python.  Each write that touches work rows (a commit or import with
work touches, a release that leaves work, an enqueue) sends ``pg_notify`` on it; delivered at
commit."""


def touch_work_sql(table: str, key: str, priority: str, due: str, own: str) -> str:
    """The touch rule (:func:`harel.store.author.touch`) of one work row as one ``INSERT ...
    ON CONFLICT`` on ``table``, over the SQL expressions of the touch's key, priority, due
    time and own flag: an absent row is inserted free at ``due``; a free row's ``ready_at``
    drops to ``due`` when that is earlier; a leased row keeps its lease's expiry; the
    priority changes only when ``own``.  The functions' loop and ``enqueue``'s statement
    both use it, so the rule is written once."""
    return (
        "INSERT INTO " + table + " AS w (key, priority, ready_at)\n"
        "            VALUES (" + key + ", " + priority + ", " + due + ")\n"
        "            ON CONFLICT (key) DO UPDATE\n"
        "            SET priority = CASE WHEN " + own + " THEN excluded.priority "
        "ELSE w.priority END,\n"
        "                ready_at = CASE WHEN w.owner IS NULL THEN "
        "least(w.ready_at, excluded.ready_at)\n"
        "                                ELSE w.ready_at END"
    )


# The touch rule for each work row of the write, in the order given (the plan sorts them by
# key, so two writes lock shared rows in one order: no deadlock).
_TOUCH_WORK = (
    """        FOR i IN 1 .. coalesce(array_length(p_work_keys, 1), 0) LOOP
            """
    + touch_work_sql(
        "work", "p_work_keys[i]", "p_work_priority[i]", "p_work_due[i]", "p_work_own[i]"
    )
    + """;
        END LOOP;
        IF coalesce(array_length(p_work_keys, 1), 0) > 0 THEN
            PERFORM pg_notify("""
    + WAKE_CHANNEL_SQL
    + """, '');
        END IF;
"""
)

ENQUEUE = (
    "WITH entry AS (INSERT INTO {schema}.outbox (target_id, event) VALUES (%s, %s) "
    "RETURNING seq, tableoid), "
    "touched AS ("
    + touch_work_sql("{schema}.work", "%s::text", "%s::int", "%s::float8", "%s::boolean")
    + ") SELECT entry.seq, pg_notify("
    + wake_channel_sql("n.nspname::text")
    + ", '') FROM entry JOIN pg_catalog.pg_class AS c ON c.oid = entry.tableoid "
    "JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace"
)
"""``enqueue`` as ONE statement, no function call (so no layout change): the outbox row a
commit writes for one emitted event (target, event JSON), the touch of the target's work row
by the functions' rule (:func:`touch_work_sql`; key, priority, due, own), and the
``pg_notify`` a write with work touches sends, in the statement's one transaction (the signal
is delivered when it commits); it returns the entry's ``seq``.  No function runs it, so no
``search_path`` names the schema: the channel is computed from the namespace of the table the
outbox row went to (its ``tableoid``), which is the name :func:`wake_channel_sql` hashes."""

UNTARGETED = ""
"""The work row key of the untargeted outbox entries (no execution id is empty)."""

CLAIM_SETTINGS = "SET enable_bitmapscan = off"
"""What ``harel_claim`` runs under: without statistics (a fresh or bulk-loaded table) the
planner would read a whole tier through a bitmap and sort it; this leaves it the ordered
index scan that stops after ``limit`` rows (the other choice, a Seq Scan, costs more)."""


def claim_read(tiers: str, now: str, limit: str, aging: str) -> str:
    """The claim's read of the work rows (the five tier reads, merged in claim order, each
    tier's rows locked ``FOR UPDATE SKIP LOCKED``): SQL over the unqualified ``work`` table
    with the given expressions for its inputs (``harel_claim``'s parameters, or placeholders
    for ``EXPLAIN``)."""
    return (
        "SELECT c.key, c.priority FROM unnest(" + tiers + ") AS t (tier) CROSS JOIN LATERAL ("
        "SELECT w.key, w.priority, w.ready_at FROM work AS w "
        "WHERE w.priority = t.tier AND w.ready_at <= " + now + " "
        "ORDER BY w.ready_at, w.key LIMIT " + limit + " FOR UPDATE SKIP LOCKED) AS c "
        "ORDER BY c.ready_at - " + aging + " * c.priority, c.key"
    )


def _lease_function(name: str, params: str, check: str, body: str, declare: str = "") -> str:
    """``renew``'s or ``release``'s function: lock the group's row, decide (``o_done``: held by
    ``p_owner``, and ``check``) and run ``body``; the row as found is returned either way
    (what ``LeaseLost`` says)."""
    return (
        "CREATE OR REPLACE FUNCTION {schema}." + name + "(\n"
        "        p_owner text, p_key text, " + params + ",\n"
        "        OUT o_done boolean, OUT o_priority integer, OUT o_ready_at double precision,\n"
        "        OUT o_owner text\n"
        "    )\n"
        "    LANGUAGE plpgsql SET search_path = {schema}, pg_temp AS $harel$\n"
        + declare
        + "    BEGIN\n"
        "        SELECT w.priority, w.ready_at, w.owner INTO o_priority, o_ready_at, o_owner\n"
        "        FROM work AS w WHERE w.key = p_key FOR UPDATE;\n"
        "        o_done := FOUND AND o_owner IS NOT DISTINCT FROM p_owner"
        + check
        + ";\n"
        + body
        + "    END\n"
        "    $harel$"
    )


UPGRADE_TO_4: tuple[str, ...] = (
    # One row per group of due work: the execution id, or UNTARGETED.  Free: ready_at is a
    # lower bound of the group's earliest due unit; leased: the lease's expiry, owner set.
    """CREATE TABLE IF NOT EXISTS {schema}.work (
        key text COLLATE "C" PRIMARY KEY,
        priority integer NOT NULL,
        ready_at double precision NOT NULL,
        owner text
    )""",
    "CREATE INDEX IF NOT EXISTS work_ready ON {schema}.work (priority, ready_at, key)",
    # The relays by owner in seq order (a claim reads a group's first units in order; purge
    # and export find an id's rows): ordered btrees replace version 1's hash indexes.
    "DROP INDEX IF EXISTS {schema}.outbox_target",
    "DROP INDEX IF EXISTS {schema}.spawns_parent",
    "CREATE INDEX IF NOT EXISTS outbox_target_seq ON {schema}.outbox (target_id, seq)",
    "CREATE INDEX IF NOT EXISTS spawns_parent_seq ON {schema}.spawns (parent_id, seq)",
    # harel_commit and harel_import take the work touches of their write (one signature each).
    "DROP FUNCTION IF EXISTS {schema}.harel_commit(text, text, text, text, text, text, text, "
    "bigint, double precision, text, text[], text[], text[], text[], text[], text[], "
    "double precision[], text[], text, bigint, text, integer)",
    "DROP FUNCTION IF EXISTS {schema}.harel_import(text, boolean, text, text, text, text, "
    "text, bigint, double precision, text, text[], double precision[], text[], "
    "double precision[], text[], text[], text[], text[], text[], bigint[], text[])",
    # Version 3's commit, then the touches (only when the CAS won: a lost one returned).
    _extended(
        _created(UPGRADE_TO_3, "harel_commit"),
        ("p_token text, p_slot integer,\n", "p_token text, p_slot integer, " + WORK_PARAMS + ",\n"),
        ("        END IF;\n    END\n", "        END IF;\n" + _TOUCH_WORK + "    END\n"),
    ),
    # Version 2's import, then the touches (only when it wrote: a refused one returned).
    _extended(
        _created(UPGRADE_TO_2, "harel_import"),
        ("p_trace_entries text[]\n", "p_trace_entries text[], " + WORK_PARAMS + "\n"),
        ("        RETURN true;\n", _TOUCH_WORK + "        RETURN true;\n"),
    ),
    # purge forgets the id's work row too (and with it any lease on it).
    _extended(
        _created(_FUNCTIONS, "harel_purge"),
        (
            "        DELETE FROM executions AS e",
            "        DELETE FROM work AS w WHERE w.key = p_id;\n"
            "        DELETE FROM executions AS e",
        ),
    ),
    # claim: one statement.  The tier reads lock up to p_limit ready rows per priority (SKIP
    # LOCKED: rows another claimer holds are passed over, never waited for); then, in claim
    # order while the budget lasts, each group's first units: spawns and outbox entries in
    # seq order (an ordered index range cut at the budget), due timers by (fire_at, path).
    # A group with no due unit is re-dated from its timers (or dropped); the others are
    # leased to p_owner until p_expires and returned.
    """CREATE OR REPLACE FUNCTION {schema}.harel_claim(
        p_owner text, p_now double precision, p_expires double precision, p_limit integer,
        p_aging double precision, p_tiers integer[]
    ) RETURNS TABLE (
        o_key text, o_priority integer, o_timer_paths text[], o_timer_fire_at double precision[],
        o_outbox_seqs bigint[], o_outbox_events text[], o_spawn_seqs bigint[],
        o_spawn_children text[], o_spawn_roots text[], o_spawn_contexts text[]
    )
    LANGUAGE plpgsql SET search_path = {schema}, pg_temp """
    + CLAIM_SETTINGS
    + """ AS $harel$
    DECLARE
        v_row record;
        v_budget integer := p_limit;
        v_left integer;
        v_next double precision;
        v_units integer;
    BEGIN
        FOR v_row IN """
    + claim_read("p_tiers", "p_now", "p_limit", "p_aging")
    + """ LOOP
            EXIT WHEN v_budget <= 0;
            o_key := v_row.key;
            o_priority := v_row.priority;
            SELECT coalesce(array_agg(s.seq ORDER BY s.seq), ARRAY[]::bigint[]),
                   coalesce(array_agg(s.child_id ORDER BY s.seq), ARRAY[]::text[]),
                   coalesce(array_agg(s.root_path ORDER BY s.seq), ARRAY[]::text[]),
                   coalesce(array_agg(s.context ORDER BY s.seq), ARRAY[]::text[])
            INTO o_spawn_seqs, o_spawn_children, o_spawn_roots, o_spawn_contexts
            FROM (SELECT x.seq, x.child_id, x.root_path, x.context FROM spawns AS x
                  WHERE x.parent_id = v_row.key ORDER BY x.seq LIMIT v_budget) AS s;
            v_left := v_budget - cardinality(o_spawn_seqs);
            IF v_row.key = '' THEN  -- the untargeted entries
                SELECT coalesce(array_agg(o.seq ORDER BY o.seq), ARRAY[]::bigint[]),
                       coalesce(array_agg(o.event ORDER BY o.seq), ARRAY[]::text[])
                INTO o_outbox_seqs, o_outbox_events
                FROM (SELECT x.seq, x.event FROM outbox AS x
                      WHERE x.target_id IS NULL ORDER BY x.seq LIMIT v_left) AS o;
            ELSE
                SELECT coalesce(array_agg(o.seq ORDER BY o.seq), ARRAY[]::bigint[]),
                       coalesce(array_agg(o.event ORDER BY o.seq), ARRAY[]::text[])
                INTO o_outbox_seqs, o_outbox_events
                FROM (SELECT x.seq, x.event FROM outbox AS x
                      WHERE x.target_id = v_row.key ORDER BY x.seq LIMIT v_left) AS o;
            END IF;
            v_left := v_left - cardinality(o_outbox_seqs);
            SELECT coalesce(array_agg(t.path ORDER BY t.fire_at, t.path)
                            FILTER (WHERE t.fire_at <= p_now), ARRAY[]::text[]),
                   coalesce(array_agg(t.fire_at ORDER BY t.fire_at, t.path)
                            FILTER (WHERE t.fire_at <= p_now), ARRAY[]::double precision[]),
                   min(t.fire_at)
            INTO o_timer_paths, o_timer_fire_at, v_next
            FROM timers AS t WHERE t.execution_id = v_row.key;
            o_timer_paths := o_timer_paths[1:v_left];
            o_timer_fire_at := o_timer_fire_at[1:v_left];
            v_units := cardinality(o_spawn_seqs) + cardinality(o_outbox_seqs)
                       + cardinality(o_timer_paths);
            IF v_units = 0 THEN  -- an early row: nothing is due behind it
                IF v_next IS NULL THEN
                    DELETE FROM work AS w WHERE w.key = v_row.key;
                ELSE
                    UPDATE work AS w SET ready_at = v_next, owner = NULL WHERE w.key = v_row.key;
                END IF;
                CONTINUE;
            END IF;
            UPDATE work AS w SET ready_at = p_expires, owner = p_owner WHERE w.key = v_row.key;
            v_budget := v_budget - v_units;
            RETURN NEXT;
        END LOOP;
    END
    $harel$""",
    # renew: extended only while p_owner holds an unexpired lease.
    _lease_function(
        "harel_renew",
        "p_now double precision, p_expires double precision",
        " AND o_ready_at > p_now",
        """        IF o_done THEN
            UPDATE work AS w SET ready_at = p_expires WHERE w.key = p_key;
        END IF;
""",
    ),
    # release: held by p_owner (expired or not), the row is re-dated from what is left
    # (harel.store.author.next_ready): relay units at p_relay_at (relay_due of the caller's
    # clock), timers at fire_at, none before p_retry_at (when given); a group with no unit
    # left loses its row.
    _lease_function(
        "harel_release",
        "p_retry_at double precision, p_relay_at double precision",
        "",
        """        IF NOT o_done THEN
            RETURN;
        END IF;
        SELECT min(t.fire_at) INTO v_next FROM timers AS t WHERE t.execution_id = p_key;
        IF EXISTS (SELECT 1 FROM spawns AS s WHERE s.parent_id = p_key)
           OR EXISTS (SELECT 1 FROM outbox AS o WHERE o.target_id = p_key)
           OR (p_key = '' AND EXISTS (SELECT 1 FROM outbox AS o WHERE o.target_id IS NULL)) THEN
            v_next := least(v_next, p_relay_at);
        END IF;
        IF v_next IS NULL THEN
            DELETE FROM work AS w WHERE w.key = p_key;
        ELSE
            UPDATE work AS w SET ready_at = greatest(v_next, p_retry_at), owner = NULL
            WHERE w.key = p_key;
            PERFORM pg_notify("""
        + WAKE_CHANNEL_SQL
        + """, '');
        END IF;
""",
        "    DECLARE\n        v_next double precision;\n",
    ),
)
"""From version 3 to 4 (claims); idempotent, run under the schema's advisory lock, followed
by :data:`BACKFILL_TO_4`."""

BACKFILL_TO_4 = (
    "INSERT INTO {schema}.work AS w (key, priority, ready_at) "
    "SELECT u.key, 0, min(u.ready_at) FROM ("
    "SELECT t.execution_id AS key, t.fire_at AS ready_at FROM {schema}.timers AS t "
    "UNION ALL SELECT coalesce(o.target_id, ''), %s::float8 FROM {schema}.outbox AS o "
    "UNION ALL SELECT s.parent_id, %s::float8 FROM {schema}.spawns AS s"
    ") AS u GROUP BY u.key ON CONFLICT (key) DO NOTHING"
)
"""The work rows of what an older layout holds, written by the upgrade's transaction (two
bound parameters, both ``relay_due`` of the upgrade time): per execution the earliest timer,
per outbox target and per spawning parent that relay time; priority 0 (the documents are not parsed
in SQL: an execution's own next commit that touches its row sets its priority)."""

# -- version 5: the commit's own dedupe and fence ------------------------------------------------

UNMARKED_SQL = (
    "(p_event_id IS NULL OR NOT EXISTS (SELECT 1 FROM processed_events AS m "
    "WHERE m.execution_id = p_id AND m.event_id = p_event_id))"
)
"""``harel_commit``'s dedupe condition: the commit carries no event id, or the execution does
not hold its mark yet (a primary-key probe of ``processed_events``)."""

MARKED_SQL = (
    "p_event_id IS NOT NULL AND EXISTS (SELECT 1 FROM processed_events AS m "
    "WHERE m.execution_id = p_id AND m.event_id = p_event_id)"
)
"""Whether the execution holds the commit's dedupe mark (read by a CAS that missed only)."""

FENCE_SQL = "(p_base IS NULL OR receipts[p_base_slot] = p_base)"
"""``harel_commit``'s fence: the commit carries none, or the receipt of the version it expects
(ring slot ``p_base_slot``) is the token ``p_base`` (``NULL`` receipts, as an import leaves
them, never match)."""

UPGRADE_TO_5: tuple[str, ...] = (
    # One harel_commit per schema: version 4's signature goes.
    "DROP FUNCTION IF EXISTS {schema}.harel_commit(text, text, text, text, text, text, text, "
    "bigint, double precision, text, text[], text[], text[], text[], text[], text[], "
    "double precision[], text[], text, bigint, text, integer, text[], double precision[], "
    "integer[], boolean[])",
    # Version 4's commit with the dedupe and the fence inside the CAS's own WHERE (so they
    # hold under the row lock the CAS takes: the UPDATE re-checks version and receipt on the
    # newest row version after waiting for a concurrent writer), and a lost CAS also telling
    # whether the mark is held (a new statement, a new snapshot: it sees the winner's mark).
    _extended(
        _created(UPGRADE_TO_4, "harel_commit"),
        (
            "p_token text, p_slot integer, " + WORK_PARAMS + ",\n",
            "p_token text, p_slot integer, " + WORK_PARAMS + ",\n"
            "        p_base text, p_base_slot integer,\n",
        ),
        (
            "OUT o_receipt text\n",
            "OUT o_receipt text, OUT o_marked boolean\n",
        ),
        (
            "            VALUES (p_id, p_definition_id, p_status, p_outcome, p_active_path, "
            "p_parent_id,\n                    1, p_committed_at, p_data, v_receipts)\n",
            "            SELECT p_id, p_definition_id, p_status, p_outcome, p_active_path, "
            "p_parent_id,\n                   1, p_committed_at, p_data, v_receipts\n"
            "            WHERE " + UNMARKED_SQL + "\n",
        ),
        (
            "            WHERE id = p_id AND version = p_old;\n",
            "            WHERE id = p_id AND version = p_old AND " + FENCE_SQL + "\n"
            "              AND " + UNMARKED_SQL + ";\n",
        ),
        (
            "            FROM executions AS e WHERE e.id = p_id;\n            RETURN;\n",
            "            FROM executions AS e WHERE e.id = p_id;\n"
            "            o_marked := " + MARKED_SQL + ";\n            RETURN;\n",
        ),
        (
            "        o_applied := true;\n",
            "        o_applied := true;\n        o_marked := false;\n",
        ),
    ),
)
"""From version 4 to 5 (issue 20: one round trip per event); idempotent, run under the
schema's advisory lock.  ``harel_commit`` takes the fence (``p_base``, ``p_base_slot``) and
applies only while the execution does not hold the commit's dedupe mark and the fence holds;
a lost CAS returns ``o_marked`` too."""

UPGRADES: dict[int, tuple[str, ...]] = {
    1: UPGRADE_TO_2 + UPGRADE_TO_3 + UPGRADE_TO_4 + UPGRADE_TO_5,
    2: UPGRADE_TO_3 + UPGRADE_TO_4 + UPGRADE_TO_5,
    3: UPGRADE_TO_4 + UPGRADE_TO_5,
    4: UPGRADE_TO_5,
}
"""The steps that bring each older version to :data:`SCHEMA_VERSION` (those from before
version 4 include version 4's, so :data:`BACKFILL_TO_4` follows them)."""

BACKFILLED_BELOW = 4
"""An upgrade from a version below this one writes :data:`BACKFILL_TO_4` (version 4 brought
the work rows; a version-4 schema already keeps them)."""

DDL: tuple[str, ...] = V1_DDL + UPGRADE_TO_2 + UPGRADE_TO_3 + UPGRADE_TO_4 + UPGRADE_TO_5
"""Every statement that creates the current layout, in order; each is idempotent."""

TABLES = (
    "executions",
    "outbox",
    "spawns",
    "processed_events",
    "timers",
    "trace",
    "work",
    "harel_schema",
)
"""The tables of the layout (for tests and tools)."""


class PostgresOpen(OpenSteps):
    """PostgreSQL's steps of the shared open flow.  A current (or refused: newer, too old,
    foreign) schema costs two probes and writes nothing.  Creating or upgrading runs in one
    transaction holding the schema's advisory lock: openers arriving together wait there, the
    first does the work, the others probe again and write nothing.  An upgrade from before
    version 4 ends with :data:`BACKFILL_TO_4` (the work rows of what the older layout holds;
    ``now`` dates them, default this process's clock), then the version row."""

    current = SCHEMA_VERSION
    upgrades = UPGRADES
    distribution = DISTRIBUTION

    def __init__(self, schema: str, where: str, now: float | None = None) -> None:
        self.schema, self.where, self.now = schema, where, now

    def probe(self) -> Step[Stored]:
        if not first_row((yield Statement(EXISTS_PROBE, (self.schema,))))[0]:
            if first_row((yield Statement(FOREIGN_PROBE, (self.schema,))))[0]:
                raise SchemaVersionError(
                    f"schema {self.schema!r} has an executions table but no harel_schema "
                    "version table: it was written by another application or by the reference "
                    "implementation, which this store cannot read (see docs/porting.md); use "
                    "another ?schema="
                )
            return Stored()
        row = (yield Statement(VERSION_PROBE)).first
        if row is None:
            return Stored()
        document = row[0]
        if not isinstance(document, dict) or not isinstance(document.get("version"), int):
            raise StoreCorrupted(
                f"the harel_schema row of {self.schema!r} is damaged: {document!r}"
            )
        writer = document.get("written_by")
        return Stored(int(document["version"]), writer if isinstance(writer, str) else None)

    def lock(self) -> Step[bool]:
        yield Statement(BEGIN)
        yield Statement(LOCK, (ADVISORY_LOCK_CLASS, self.schema))
        return True

    def create(self) -> Step[None]:
        for ddl in DDL:
            yield Statement(ddl)

    def upgrade(self, version: int) -> Step[None]:
        for ddl in UPGRADES[version]:
            yield Statement(ddl)
        if version < BACKFILLED_BELOW:
            at = relay_due(time.time() if self.now is None else self.now)
            yield Statement(BACKFILL_TO_4, (at, at))

    def record(self, found: Stored) -> Step[None]:
        yield Statement(RECORD_VERSION, (SCHEMA_VERSION, written_by()))

    def unlock(self) -> Step[None]:
        yield Statement(COMMIT)


def open_schema(schema: str, where: str, now: float | None = None) -> Step[None]:
    """Make sure ``schema`` holds the current layout (see the module docstring); an upgrade
    also writes the work rows of what the older layout holds (``now``: the upgrade time,
    default this process's clock)."""
    yield from open_flow(PostgresOpen(schema, where, now))
