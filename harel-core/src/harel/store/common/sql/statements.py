"""Every statement of the SQL family, written once and rendered for one :class:`Dialect`.

Texts use ``:name`` slots (see :func:`~harel.store.common.sql.dialect.render`).  Two statement
shapes depend on the dialect:

* **side writes of a commit** (outbox, dedupe mark, spawns, timers, trace): unguarded for an
  interactive dialect, whose plan runs them only after the CAS changed its row; guarded by
  ``EXISTS (... id = :id AND commit_token = :token)`` for a single-request dialect, whose
  whole commit is one request: a lost CAS leaves the token unchanged, so every side write of
  the loser matches no row (a byte-identical loser included);
* **upserts**: ``ON CONFLICT`` clauses, or ``INSERT OR REPLACE/IGNORE`` (``Dialect.upsert``).

A commit's CAS carries all of the commit's conditions in its ``WHERE``, one form per receipt
slot and condition set (``update_*_at``, ``*_fenced_*``, ``*_deduped_*``): the stored version
is ``:expected``; *fenced* (a copy this process stored), the receipt of ``:expected`` is
``:base``; *deduped* (a ``processed_event_id``), no mark ``:event_id`` is stored.  So a
refused commit changes no row in the statement the happy path sends anyway, and every side
write after it is skipped (interactive) or matches nothing (single-request).

A side write is an ``INSERT ... SELECT`` so that it can carry a ``WHERE``; an upsert over a
``SELECT`` needs one anyway (``WHERE true``) for SQLite's parser.  The trace index is
``MAX(idx) + 1`` of the execution's stored steps (0 for the first), computed inside the
statement that inserts it, so indices stay contiguous; the ring trim deletes
``idx <= MAX(idx) - trace_max``.
"""

# ruff: noqa: S608 - every text below is composed of fixed fragments; values are slots only

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache, partial

from harel.store.common.claims import PRIORITIES
from harel.store.common.sql.dialect import Dialect, Rendered, render
from harel.store.common.sql.schema import (
    DDL,
    RECEIPT_COLUMNS,
    RECORD_VERSION,
    UPGRADES,
    VERSION_PROBE,
)
from harel.store.common.sql.schema import TABLES_PROBE as _TABLES_PROBE
from harel.store.contract import FINISHED

SUMMARY_COLUMNS = "id, definition_id, status, outcome, active_path, version, parent_id, updated_at"
"""The listing's projection, in the order :func:`~harel.store.common.sql.plan` decodes it."""

FINISHED_SLOTS = tuple(f"finished{n}" for n in range(len(FINISHED)))
"""Slot names binding the finished statuses (values: ``sorted(s.value for s in FINISHED)``)."""

_OWNER = "EXISTS (SELECT 1 FROM executions WHERE id = :id AND commit_token = :token)"
_EXISTS = "EXISTS (SELECT 1 FROM executions WHERE id = :id)"
_INACTIVE = (
    "(:force OR NOT EXISTS (SELECT 1 FROM executions WHERE id = :id AND status NOT IN ("
    + ", ".join(f":{slot}" for slot in FINISHED_SLOTS)
    + ")))"
)

_EXPORT = (
    " UNION ALL ".join(
        f"SELECT {kind}, {columns} FROM {table} WHERE {column} = :id"
        for kind, columns, table, column in (
            (0, "NULL, data, updated_at, NULL", "executions", "id"),
            (1, "event_id, processed_at, NULL, NULL", "processed_events", "execution_id"),
            (2, "path, fire_at_repr, NULL, NULL", "timers", "execution_id"),
            (3, "seq, event, NULL, NULL", "outbox", "target_id"),
            (4, "seq, child_id, root_path, context", "spawns", "parent_id"),
            (5, "idx, entry, NULL, NULL", "trace", "execution_id"),
        )
    )
    + " ORDER BY 1, 2"
)
"""Every row one execution id owns, as ``(kind, key, a, b, c)`` rows sorted by kind then key:
0 the execution ``(data, updated_at)``, 1 a mark ``(event_id, processed_at)``, 2 a timer
``(path, fire_at_repr)``, 3 an outbox entry ``(seq, event)``, 4 a spawn intent ``(seq,
child_id, root_path, context)``, 5 a trace step ``(idx, entry)``.  One ``SELECT`` is one read
transaction in SQLite, so the record is a consistent snapshot without ``BEGIN``."""


class SqlStatements:
    """The rendered statements of one dialect (build with :func:`statements_for`)."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        guard = _OWNER if dialect.single_request else None
        r = self._r

        # -- schema
        self.tables_probe = r(_TABLES_PROBE)
        self.version_probe = r(VERSION_PROBE)
        self.ddl = tuple(r(text) for text in DDL)
        self.record_version = r(self._upsert(RECORD_VERSION))
        self.upgrades = {old: tuple(r(text) for text in texts) for old, texts in UPGRADES.items()}

        # -- commit: the CAS (one form per receipt slot), the found version, the side writes
        self.insert_execution = r(self._upsert(_insert_execution("")))
        """The insert of an execution row that writes no receipt (an import)."""
        self.update_execution = r(_update_execution(""))
        """The full CAS without a receipt (kept for raw writers outside a commit: benchmarks)."""
        self.insert_execution_at = tuple(
            r(self._upsert(_insert_execution(column))) for column in RECEIPT_COLUMNS
        )
        """A commit's insert, by the receipt slot of its new version: the row with
        ``:receipt`` (the commit token) in that slot's column."""
        self.update_execution_at = tuple(r(_update_execution(column)) for column in RECEIPT_COLUMNS)
        """The full CAS, by receipt slot: every summary column, the document, ``commit_token``
        and ``r{slot} = :receipt``, in the row's one rewrite."""
        self.update_execution_fenced_at = self._cas(_update_execution, fenced=True)
        """:attr:`update_execution_at` that applies only while the receipt of ``:expected``
        (the column before ``r{slot}`` in the ring) is ``:base``, the commit's fence."""
        self.update_execution_deduped_at = self._cas(_update_execution, deduped=True)
        """:attr:`update_execution_at` that applies only while the execution holds no dedupe
        mark ``:event_id``."""
        self.update_execution_fenced_deduped_at = self._cas(
            _update_execution, fenced=True, deduped=True
        )
        """:attr:`update_execution_at` with both conditions."""
        self.update_state_at = tuple(r(_update_state(column)) for column in RECEIPT_COLUMNS)
        """The narrow CAS, by receipt slot: applies only when the indexed summary columns
        already hold the new values, and names none of them in ``SET``, so SQLite rewrites no
        index entry (it maintains every index whose column is named in ``SET``, changed or
        not; the receipt columns are in no index).  On a miss (summary changed, or a lost CAS)
        the plan runs :attr:`update_execution_at`.  Interactive dialects only (they never
        write ``commit_token``, so it is not set here)."""
        self.update_state_fenced_at = self._cas(_update_state, fenced=True)
        """:attr:`update_state_at` fenced like :attr:`update_execution_fenced_at`."""
        self.update_state_deduped_at = self._cas(_update_state, deduped=True)
        """:attr:`update_state_at` deduped like :attr:`update_execution_deduped_at`."""
        self.update_state_fenced_deduped_at = self._cas(_update_state, fenced=True, deduped=True)
        """:attr:`update_state_at` with both conditions."""
        self.update_document_fenced_at = self._cas(_update_document, fenced=True)
        """The fenced CAS of a copy whose summary columns are the stored ones
        (:attr:`~harel.store.author.PreparedCommit.summary_stored`), by receipt slot: it sets
        only the document, ``version``, ``updated_at`` and ``r{slot}``, and checks only the
        version and the fence (while the fence holds, the row is the one that commit wrote, so
        its summary columns need neither rewriting nor checking).  Interactive dialects only,
        like :attr:`update_state_at`; on a miss the plan runs the full CAS."""
        self.found_receipts = r(
            f"SELECT e.version, {', '.join(f'e.{column}' for column in RECEIPT_COLUMNS)}, "
            "EXISTS (SELECT 1 FROM processed_events AS p WHERE p.execution_id = e.id "
            "AND p.event_id = :event_id) FROM executions AS e WHERE e.id = :id"
        )
        """What a lost CAS reads: the stored version, the receipt ring and whether the dedupe
        mark ``:event_id`` is stored (``(version, r0, .., r7, marked)``; ``:event_id`` NULL:
        never), to tell a re-sent stored commit, an already-processed event and a conflict
        apart in the same read."""
        self.execution_status = r("SELECT status FROM executions WHERE id = :id")
        side = partial(self._side_insert, guard)
        self.insert_outbox = side("outbox (target_id, event)", ":target, :event")
        self.mark_processed = side(
            "processed_events (execution_id, event_id, processed_at)",
            ":id, :event_id, :at",
            "(execution_id, event_id) DO NOTHING",
        )
        self.insert_spawn = side(
            "spawns (parent_id, child_id, root_path, context)", ":id, :child, :root, :context"
        )
        self.schedule_timer = side(
            "timers (execution_id, path, fire_at, fire_at_repr)",
            ":id, :path, :fire_at, :fire_at_repr",
            "(execution_id, path) DO UPDATE "
            "SET fire_at = excluded.fire_at, fire_at_repr = excluded.fire_at_repr",
        )
        self.cancel_timer = r(
            "DELETE FROM timers WHERE execution_id = :id AND path = :path" + _and(guard)
        )
        self.append_trace = r(_append_trace(guard))
        self.trim_trace = r(_trim_trace(guard))

        # -- append_trace outside a commit: the insert itself checks that the execution exists
        self.append_trace_alone = r(_append_trace(_EXISTS))
        self.trim_trace_alone = r(_trim_trace(None))

        # -- retention
        self.purge = tuple(
            r(f"DELETE FROM {table} WHERE {column} = :id AND {_INACTIVE}")
            for table, column in (
                ("processed_events", "execution_id"),
                ("timers", "execution_id"),
                ("outbox", "target_id"),
                ("spawns", "parent_id"),
                ("trace", "execution_id"),
                ("work", "key"),
                ("executions", "id"),  # last: the guards above read this row
            )
        )
        """Purge's deletes, to run in one transaction; the last one's rowcount says whether
        the execution existed and was not active (or ``force`` was set)."""
        self.prune_processed = r(
            "DELETE FROM processed_events WHERE (execution_id, event_id) IN ("
            "SELECT execution_id, event_id FROM processed_events "
            "WHERE processed_at < :older_than ORDER BY processed_at LIMIT :batch)"
        )

        self.footprint = tuple(
            (label, r(f"SELECT {key} FROM {table} WHERE {column} = :id ORDER BY {key}"))
            for label, key, table, column in (
                ("execution", "''", "executions", "id"),
                ("processed", "event_id", "processed_events", "execution_id"),
                ("timer", "path", "timers", "execution_id"),
                ("outbox", "seq", "outbox", "target_id"),
                ("spawn", "seq", "spawns", "parent_id"),
                ("trace", "idx", "trace", "execution_id"),
            )
        )
        """For test harnesses: ``(label, query)`` pairs listing every row one execution owns."""

        # -- records: export (one statement, so one snapshot in every dialect) and import
        self.export = r(_EXPORT)
        self.import_trace = side(
            "trace (execution_id, idx, entry)",
            ":id, :idx, :entry",
            "(execution_id, idx) DO UPDATE SET entry = excluded.entry",
        )
        relay = partial(self._side_insert, None, "outbox (target_id, event)", ":target, :event")
        self.relay_outbox = relay()
        """An outbox row with no owner guard: a relays-only import (no execution to own it)."""

        # -- enqueue: an outbox row with no owner (the target is never read) and its seq
        self.enqueue_outbox = relay() if dialect.single_request else relay(returning="seq")
        """:attr:`relay_outbox`, telling the new row's ``seq``: as a ``RETURNING`` row in an
        interactive dialect (SQLite 3.35+), as the write's rowid
        (:attr:`~harel.store.common.sql.requests.Result.last_id`, rqlite's ``last_insert_id``)
        in a single-request one."""

        # -- claims: the work rows (see harel.store.common.claims; key '' = untargeted)
        self.touch_work = self._touch(guard)
        """:func:`~harel.store.common.claims.touch` of one row (slots ``key``, ``priority``,
        ``due``, ``own``; guarded like every side write): one upsert, or an ``UPDATE`` and an
        ``INSERT OR IGNORE`` for an engine without ``ON CONFLICT``."""
        self.touch_work_free = self._touch(None)
        """:attr:`touch_work` without the owner guard (a relays-only import)."""
        self.claim_probe = r(
            "SELECT 1 FROM work WHERE priority IN ("
            + ", ".join(str(p) for p in PRIORITIES)
            + ") AND ready_at <= :now LIMIT 1"
        )
        """Whether any row is ready (a read: an idle claim writes nothing)."""
        self.claim_units = r(_CLAIM_UNITS)
        """The claim's plan and units, in claim order (see :data:`_CLAIM_UNITS`)."""
        self.claim_lease = r(_CLAIM_LEASE)
        """Lease each planned row with a due unit; re-date the others (``NULL``: to drop)."""
        self.claim_drop = r(
            "DELETE FROM work WHERE priority IN ("
            + ", ".join(str(p) for p in PRIORITIES)
            + ") AND ready_at IS NULL"
        )
        """Delete the rows :attr:`claim_lease` found with nothing behind them."""
        self.renew_lease = r(
            "UPDATE work SET ready_at = :expires "
            "WHERE key = :key AND owner = :owner AND ready_at > :now"
        )
        self.work_row = r("SELECT priority, ready_at, owner FROM work WHERE key = :key")
        self.list_leases = r(_LIST_LEASES)
        """The held leases at ``:now``: ``:limit`` rows of each tier (see :data:`_LIST_LEASES`)."""
        self.release_drop = r(
            "DELETE FROM work WHERE key = :key AND owner = :owner AND NOT ("
            f"{_relay_exists(':key')} OR EXISTS (SELECT 1 FROM timers WHERE execution_id = :key))"
        )
        """Release a row with no unit left: delete it."""
        self.release_free = r(
            f"UPDATE work SET owner = NULL, ready_at = MAX({_next_ready(':key')}, "
            "COALESCE(:retry_at, -9e999)) WHERE key = :key AND owner = :owner"
        )
        """Release a row with units left: free it, ready at
        :func:`~harel.store.common.claims.next_ready` (run after :attr:`release_drop`)."""

        # -- single-statement writes
        self.ack_outbox = r("DELETE FROM outbox WHERE seq = :seq")
        self.ack_spawn = r("DELETE FROM spawns WHERE seq = :seq")
        self.delete_timer = r(
            "DELETE FROM timers WHERE execution_id = :id AND path = :path AND fire_at = :fire_at"
        )

        # -- reads
        self.load = r("SELECT data FROM executions WHERE id = :id")
        self.load_for_event = r(
            "SELECT e.data, EXISTS (SELECT 1 FROM processed_events AS p "
            "WHERE p.execution_id = e.id AND p.event_id = :event_id) "
            "FROM executions AS e WHERE e.id = :id"
        )
        self.is_processed = r(
            "SELECT 1 FROM processed_events WHERE execution_id = :id AND event_id = :event_id"
        )
        self.pending_outbox = r(
            "SELECT seq, target_id, event FROM outbox ORDER BY seq LIMIT :limit"
        )
        self.pending_spawns = r(
            "SELECT seq, parent_id, child_id, root_path, context FROM spawns "
            "ORDER BY seq LIMIT :limit"
        )
        self.due_timers = r(
            "SELECT execution_id, path, fire_at_repr FROM timers WHERE fire_at <= :now "
            "ORDER BY fire_at, execution_id, path LIMIT :limit"
        )
        self.read_trace = r("SELECT idx, entry FROM trace WHERE execution_id = :id ORDER BY idx")

    def _r(self, text: str) -> Rendered:
        return render(text, self.dialect)

    def _cas(
        self, form: Callable[[str], str], *, fenced: bool = False, deduped: bool = False
    ) -> tuple[Rendered, ...]:
        """``form`` (:func:`_update_state` or :func:`_update_execution`) by receipt slot,
        with the fence (the receipt of ``:expected``, the ring's previous slot, ``= :base``)
        and the dedupe condition (:data:`_UNMARKED`) when asked: conditions of the CAS
        itself, so a refused commit changes no row in the statement that would have
        written it."""
        return tuple(
            self._r(
                _conditioned(form(column), RECEIPT_COLUMNS[slot - 1] if fenced else None, deduped)
            )
            for slot, column in enumerate(RECEIPT_COLUMNS)
        )

    def _side_insert(
        self,
        guard: str | None,
        into: str,
        values: str,
        conflict: str | None = None,
        *,
        returning: str | None = None,
    ) -> Rendered:
        """``INSERT INTO into SELECT values [WHERE guard] [ON CONFLICT conflict] [RETURNING
        returning]``."""
        text = f"INSERT INTO {into} SELECT {values}" + _where(guard, upsert=conflict is not None)
        if conflict is not None:
            text = self._upsert(f"{text} ON CONFLICT {conflict}")
        return self._r(text if returning is None else f"{text} RETURNING {returning}")

    def _upsert(self, text: str) -> str:
        """``text`` as written (``ON CONFLICT``), or rewritten to ``INSERT OR ...``."""
        if self.dialect.upsert == "on_conflict":
            return text
        head, _, clause = text.partition(" ON CONFLICT ")
        verb = "IGNORE" if clause.endswith("DO NOTHING") else "REPLACE"
        return f"INSERT OR {verb} INTO " + head.removeprefix("INSERT INTO ")

    def _touch(self, guard: str | None) -> tuple[Rendered, ...]:
        """The statements of one work-row touch (see :attr:`touch_work`)."""
        if self.dialect.upsert == "on_conflict":
            return (
                self._r(
                    "INSERT INTO work (key, priority, ready_at, owner) "
                    f"SELECT :key, :priority, :due, NULL{_where(guard, upsert=True)} "
                    "ON CONFLICT (key) DO UPDATE SET "
                    "priority = CASE WHEN :own THEN excluded.priority ELSE priority END, "
                    "ready_at = CASE WHEN owner IS NULL THEN MIN(ready_at, excluded.ready_at) "
                    "ELSE ready_at END"
                ),
            )
        return (
            self._r(
                "UPDATE work SET priority = CASE WHEN :own THEN :priority ELSE priority END, "
                "ready_at = CASE WHEN owner IS NULL THEN MIN(ready_at, :due) ELSE ready_at END "
                "WHERE key = :key" + _and(guard)
            ),
            self._r(
                "INSERT OR IGNORE INTO work (key, priority, ready_at, owner) "
                "SELECT :key, :priority, :due, NULL" + _where(guard)
            ),
        )

    def listing(self, clauses: Sequence[str], statuses: int) -> Rendered:
        """The keyset probe of ``list_executions``.

        ``clauses`` are fixed filter texts with slots (``id > :after``, ...); with several
        statuses, one index-ordered arm per status (slot ``:status{n}``) merged by id, so each
        arm reads at most ``:probe`` rows and the cost grows with the page, not the matches.
        """
        return _listing(tuple(clauses), statuses, self.dialect)


def _relay_exists(key: str) -> str:
    """Whether the group ``key`` (a slot or a column; ``''``: untargeted) has a relay unit."""
    return (
        f"(CASE WHEN {key} = '' THEN EXISTS (SELECT 1 FROM outbox WHERE target_id IS NULL) "
        f"ELSE EXISTS (SELECT 1 FROM outbox WHERE target_id = {key}) END "
        f"OR EXISTS (SELECT 1 FROM spawns WHERE parent_id = {key}))"
    )


def _next_ready(key: str) -> str:
    """:func:`~harel.store.common.claims.next_ready` of the group ``key`` without
    ``retry_at``: its earliest timer, or ``:relay`` (``relay_due(now)``) when that is earlier
    and it has a relay unit (``NULL``: no unit)."""
    earliest = f"(SELECT MIN(fire_at) FROM timers WHERE execution_id = {key})"
    relay = _relay_exists(key)
    return f"(CASE WHEN {relay} THEN MIN(:relay, COALESCE({earliest}, :relay)) ELSE {earliest} END)"


def _bounded_count(source: str) -> str:
    return f"(SELECT COUNT(*) FROM (SELECT 1 FROM {source} LIMIT :limit))"


_LIST_LEASES = " UNION ALL ".join(
    "SELECT * FROM (SELECT key, priority, ready_at, owner FROM work WHERE priority = "
    f"{priority} AND ready_at > :now AND owner IS NOT NULL ORDER BY ready_at, key LIMIT :limit)"
    for priority in PRIORITIES
)
"""``list_leases``' read: per priority tier, a range of ``work_ready`` (``priority, ready_at,
key``) past ``:now`` in expiry order, the free rows in it (future timers) skipped, at most
``:limit`` leased rows each; the plan merges the tiers (a read: no lock, nothing written)."""

_CLAIM_PLAN = (
    "WITH ready AS ("
    + " UNION ALL ".join(
        "SELECT * FROM (SELECT key, priority, ready_at FROM work WHERE priority = "
        f"{priority} AND ready_at <= :now ORDER BY ready_at, key LIMIT :limit)"
        for priority in PRIORITIES
    )
    + "), counted AS (SELECT key, priority, ready_at, "
    + _bounded_count("spawns WHERE parent_id = r.key")
    + " AS s, CASE WHEN r.key = '' THEN "
    + _bounded_count("outbox WHERE target_id IS NULL")
    + " ELSE "
    + _bounded_count("outbox WHERE target_id = r.key")
    + " END AS o, "
    + _bounded_count("timers WHERE execution_id = r.key AND fire_at <= :now")
    + " AS t FROM ready AS r), ranked AS (SELECT *, :limit - COALESCE(SUM(s + o + t) OVER ("
    "ORDER BY ready_at - :aging * priority, key ROWS BETWEEN UNBOUNDED PRECEDING AND 1 "
    "PRECEDING), 0) AS budget, ROW_NUMBER() OVER (ORDER BY ready_at - :aging * priority, key) "
    "AS ord FROM counted), "
    "plan AS (SELECT *, MIN(s, budget) AS st, MIN(o, budget - MIN(s, budget)) AS ot "
    "FROM ranked WHERE budget > 0)"
)
"""A claim's plan, as a ``WITH`` prefix: the ready rows of each tier (``:limit`` each, by
``ready_at``), each with its due units counted (``s`` spawns, ``o`` outbox entries, ``t`` due
timers, each count bounded by ``:limit``), ranked in claim order (``ord``), and the budget left
before it; ``plan`` keeps the rows the budget reaches (the memory store's loop, in SQL), with
how many spawns (``st``) and outbox entries (``ot``) the claim takes from each."""


def _upto(source: str, take: str) -> str:
    """The ``seq`` of the ``take``-th relay unit of ``source`` by ``seq`` (of its first
    ``:limit``)."""
    return (
        f"(SELECT MAX(seq) FROM (SELECT seq, ROW_NUMBER() OVER (ORDER BY seq) AS n FROM ("
        f"SELECT seq FROM {source} ORDER BY seq LIMIT :limit)) WHERE n <= {take})"
    )


_CLAIM_UNITS = (
    f"SELECT * FROM ({_CLAIM_PLAN}, cut AS (SELECT key, ord, st, ot, CASE WHEN st > 0 THEN "
    + _upto("spawns WHERE parent_id = p.key", "p.st")
    + " END AS s_last, CASE WHEN ot > 0 AND key = '' THEN "
    + _upto("outbox WHERE target_id IS NULL", "p.ot")
    + " WHEN ot > 0 THEN "
    + _upto("outbox WHERE target_id = p.key", "p.ot")
    + " END AS o_last FROM plan AS p WHERE s + o + t > 0) "
    "SELECT 0 AS kind, ord, key, priority, ready_at, NULL, NULL, NULL FROM plan "
    "WHERE s + o + t > 0 "
    "UNION ALL SELECT 1, c.ord, c.key, x.seq, x.child_id, x.root_path, x.context, NULL "
    "FROM cut AS c CROSS JOIN spawns AS x ON x.parent_id = c.key AND x.seq <= c.s_last "
    "UNION ALL SELECT 2, c.ord, c.key, x.seq, x.event, NULL, NULL, NULL FROM cut AS c "
    "CROSS JOIN outbox AS x ON x.target_id IS NULL AND x.seq <= c.o_last WHERE c.key = '' "
    "UNION ALL SELECT 2, c.ord, c.key, x.seq, x.event, NULL, NULL, NULL FROM cut AS c "
    "CROSS JOIN outbox AS x ON x.target_id = c.key AND x.seq <= c.o_last WHERE c.key <> '' "
    "UNION ALL SELECT 3, c.ord, c.key, x.path, x.fire_at_repr, NULL, NULL, NULL FROM cut AS c "
    "CROSS JOIN timers AS x ON x.execution_id = c.key AND x.fire_at <= :now) ORDER BY 2, 1, 4"
)
"""A claim's units, as rows ``(kind, ord, key, a, b, c, d, _)`` sorted by claim order then
kind: 0 a row the claim leases ``(priority, ready_at)``, 1 a spawn intent ``(seq, child_id,
root_path, context)``, 2 an outbox entry ``(seq, event)``, 3 a due timer ``(path,
fire_at_repr)`` (all of the row's: :func:`~harel.store.common.claims.take_units` cuts them).
Only the spawns and outbox entries the budget takes are read, each group's first by ``seq``
(``CROSS JOIN``: SQLite keeps the plan's rows outermost, so each is a bounded range read of an
index, never a walk of the whole untargeted queue)."""

_DUE = (
    f"({_relay_exists('work.key')} OR EXISTS (SELECT 1 FROM timers "
    "WHERE execution_id = work.key AND fire_at <= :now))"
)

_CLAIM_LEASE = (
    f"UPDATE work SET owner = CASE WHEN {_DUE} THEN :owner END, "
    f"ready_at = CASE WHEN {_DUE} THEN :expires ELSE "
    "(SELECT MIN(fire_at) FROM timers WHERE execution_id = work.key) END "
    f"WHERE key IN (SELECT key FROM ({_CLAIM_PLAN} SELECT key FROM plan))"
)
"""The claim's one write: each row of the plan is leased (``owner``, ``ready_at = :expires``)
when it has a due unit, else re-dated to its earliest timer (``NULL`` when it has none: the
claim then deletes it); run in the transaction of :data:`_CLAIM_UNITS`, it sees the same
plan."""


def _insert_execution(receipt: str) -> str:
    """The insert of an execution row; ``receipt`` names the receipt column it also sets
    (one of :data:`RECEIPT_COLUMNS`, or ``""``: none)."""
    column, slot = (f"{receipt}, ", ":receipt, ") if receipt else ("", "")
    return (  # commit_token last: single-request dialects find their owner token there
        "INSERT INTO executions (id, definition_id, status, outcome, active_path, parent_id, "
        f"version, data, updated_at, {column}commit_token) VALUES (:id, :definition_id, "
        f":status, :outcome, :active_path, :parent_id, :version, :data, :updated_at, "
        f"{slot}:token) ON CONFLICT (id) DO NOTHING"
    )


def _update_state(receipt: str) -> str:
    """The narrow CAS (see :attr:`SqlStatements.update_state_at`); ``receipt`` names the
    receipt column it also sets."""
    return (
        "UPDATE executions SET outcome = :outcome, active_path = :active_path, "
        f"version = :version, data = :data, updated_at = :updated_at, {receipt} = :receipt "
        "WHERE id = :id AND version = :expected AND status = :status "
        "AND definition_id = :definition_id AND parent_id IS :parent_id"
    )


def _update_document(receipt: str) -> str:
    """The CAS of :attr:`SqlStatements.update_document_fenced_at` before its fence; ``receipt``
    names the receipt column it also sets."""
    return (
        "UPDATE executions SET version = :version, data = :data, updated_at = :updated_at, "
        f"{receipt} = :receipt WHERE id = :id AND version = :expected"
    )


_UNMARKED = (
    "NOT EXISTS (SELECT 1 FROM processed_events WHERE execution_id = :id AND event_id = :event_id)"
)
"""The dedupe condition of a commit carrying a processed event id: no mark of it is stored."""


def _conditioned(cas: str, fence: str | None, deduped: bool) -> str:
    """``cas`` (an ``UPDATE`` ending in its ``WHERE``) with the fence ``fence = :base``
    (``fence``: the receipt column of ``:expected``; ``None``: no fence) and, when
    ``deduped``, :data:`_UNMARKED` added to its conditions."""
    if fence is not None:
        cas += f" AND {fence} = :base"
    return f"{cas} AND {_UNMARKED}" if deduped else cas


def _update_execution(receipt: str) -> str:
    """The full CAS; ``receipt`` names the receipt column it also sets (or ``""``: none)."""
    column = f", {receipt} = :receipt" if receipt else ""
    return (
        "UPDATE executions SET definition_id = :definition_id, status = :status, "
        "outcome = :outcome, active_path = :active_path, parent_id = :parent_id, "
        "version = :version, data = :data, updated_at = :updated_at, "
        f"commit_token = :token{column} WHERE id = :id AND version = :expected"
    )


def _where(guard: str | None, *, upsert: bool = False) -> str:
    if guard is not None:
        return f" WHERE {guard}"
    return " WHERE true" if upsert else ""


def _and(guard: str | None) -> str:
    return "" if guard is None else f" AND {guard}"


def _append_trace(guard: str | None) -> str:
    return (
        "INSERT INTO trace (execution_id, idx, entry) SELECT :id, next_idx, :entry FROM ("
        "SELECT COALESCE(MAX(idx), -1) + 1 AS next_idx FROM trace WHERE execution_id = :id)"
        + _where(guard)
    )


def _trim_trace(guard: str | None) -> str:
    return (
        "DELETE FROM trace WHERE execution_id = :id AND idx <= "
        "(SELECT MAX(idx) FROM trace WHERE execution_id = :id) - :keep" + _and(guard)
    )


def _select_page(clauses: Sequence[str]) -> str:
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    return f"SELECT {SUMMARY_COLUMNS} FROM executions{where} ORDER BY id LIMIT :probe"


@lru_cache(maxsize=256)
def _listing(clauses: tuple[str, ...], statuses: int, dialect: Dialect) -> Rendered:
    if statuses <= 1:
        extra = ["status = :status0"] if statuses == 1 else []
        return render(_select_page([*clauses, *extra]), dialect)
    arms = [
        f"SELECT * FROM ({_select_page([*clauses, f'status = :status{n}'])})"
        for n in range(statuses)
    ]
    return render(" UNION ALL ".join(arms) + " ORDER BY id LIMIT :probe", dialect)


@lru_cache(maxsize=16)
def statements_for(dialect: Dialect) -> SqlStatements:
    """The statements of ``dialect`` (rendered once per dialect)."""
    return SqlStatements(dialect)
