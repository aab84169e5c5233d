"""Where a SQLite state-only commit spends its microseconds, each part measured on its own.

On one database file in the CPU-bound setting (``synchronous=NORMAL``), loops taking turns, each
on an execution row of its own:

* ``encode`` — ``encode_execution`` (payload checks + JSON), which the raw write pays too;
* ``raw`` — encode + one ``UPDATE`` of ``data`` and ``version`` (its own implicit transaction):
  the raw write of figure 2;
* ``store SQL`` — encode + the store's own narrow ``update_state_at`` statement, autocommit
  like the store sends it for a state-only commit (it sets the document, version, outcome,
  active path, ``updated_at`` and the new version's receipt column, and its ``WHERE`` also
  checks status, definition and parent, so no index entry is rewritten): what the store
  sends, without its Python;
* ``store SQL kept`` — encode + the statement the store sends for a copy it stored itself
  whose summary did not change (every commit of this bench after the first):
  ``update_document_fenced_at``, which sets the document, version, ``updated_at`` and the
  receipt column and checks the version and the fence only;
* ``store`` — ``SqliteStore.commit(exe, [])``;
* ``scan`` — ``execution_ok`` alone, the payload checks' fast path (part of ``encode``);
* ``envelope`` — ``bump_and_prepare`` + ``stored_as``: the commit envelope (encode included,
  plus the version bump, the commit token, the fence and re-send bookkeeping);
* ``pydantic`` — ``exe.model_dump_json()``, and ``plain raw`` — that + the CAS ``UPDATE`` of
  the plain four-column table of :mod:`plain`: figure 2's headline baseline.

``store`` minus ``store SQL kept`` is the store's own Python (plan, commit envelope,
validation); ``envelope`` minus ``encode`` is the envelope's own share of it.

:func:`redis_anatomy` does the same for Redis: ``pydantic``, ``plain raw`` (that + one plain
``SET``), ``encode``, ``script`` (encode + the store's own state-only commit script sent raw,
``raw_script_commit()``: one ``EVALSHA``) and ``store`` (``RedisStore.commit(exe, [])``).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from common import execution, interleaved, rate
from harel.conformance.harness import StoreHarness
from harel.model import Execution
from harel.store.common.codec import encode_execution
from harel.store.common.commit import bump_and_prepare, receipt_slot, stored_as
from harel.store.common.limits import MAX_DOCUMENT_BYTES
from harel.store.common.payload_scan import execution_ok
from harel.store.common.sql import SQLITE, statements_for
from harel.store.common.sql.harness import RAW_UPDATE
from plain import plain_raw


def _pydantic_loop(exe: Execution) -> Callable[[int], None]:
    """``exe.model_dump_json()`` of a changing execution."""

    def step(i: int) -> None:
        exe.context["n"] = i
        exe.model_dump_json()

    return step


def _plain_loop(exe: Execution, write: Callable[[Execution], None]) -> Callable[[int], None]:
    """The plain raw write of a changing execution."""

    def step(i: int) -> None:
        exe.context["n"] = i
        write(exe)

    return step


def _timed(
    loops: dict[str, Callable[[int], None]], seconds: float, rounds: int
) -> dict[str, float]:
    """Microseconds per call of each loop (the best of ``rounds`` interleaved samples)."""
    rates = interleaved(
        {name: partial(rate, step, seconds) for name, step in loops.items()}, rounds, best=True
    )
    return {name: 1e6 / value for name, value in rates.items()}


def redis_anatomy(harness: StoreHarness, seconds: float, rounds: int) -> dict[str, float]:
    """Microseconds per call of each Redis loop of the module docstring (best of ``rounds``
    interleaved samples), each on an execution of its own: :func:`commit_anatomy`'s loops with
    the store's own state-only script sent raw (``raw_script_commit()``) as the raw write,
    reported as ``script``."""
    script = getattr(harness, "raw_script_commit")()  # noqa: B009
    return _write_anatomy(harness, script, "script", seconds, rounds)


def anatomy(harness: StoreHarness, seconds: float, rounds: int) -> dict[str, float]:
    """Microseconds per call of each loop (the best of ``rounds`` interleaved samples: the
    parts are differences of loops, which the machine's noise would otherwise swamp)."""
    store: Any = harness.open_sync()
    conn = sqlite3.connect(str(getattr(harness, "path")), isolation_level=None)  # noqa: B009
    conn.execute("PRAGMA synchronous = NORMAL")
    update = statements_for(SQLITE).update_state_at
    kept = statements_for(SQLITE).update_document_fenced_at
    token = os.urandom(16).hex()  # a commit token (the store draws one per commit)
    names = ("raw", "sql", "kept", "store", "scan", "envelope")
    rows = {name: execution(f"anatomy-{name}") for name in names}
    for exe in rows.values():
        store.commit(exe, [])
    ring = ", ".join(f"r{slot} = ?" for slot in range(8))  # the kept row's fence: our token
    sql = f"UPDATE executions SET {ring} WHERE id = ?"  # noqa: S608 - fixed columns, values bound
    conn.execute(sql, (*[token] * 8, rows["kept"].id))

    def encode(i: int) -> None:
        rows["raw"].context["n"] = i
        encode_execution(rows["raw"])

    def raw_update(i: int) -> None:
        exe = rows["raw"]
        exe.context["n"] = i
        document = encode_execution(exe)
        conn.execute(RAW_UPDATE, (document, exe.version + 1, exe.id, exe.version))
        exe.version += 1

    def store_sql(i: int) -> None:
        exe = rows["sql"]
        exe.context["n"] = i
        statement = update[receipt_slot(exe.version + 1)].bind(
            definition_id=exe.definition_id,
            status=exe.status.value,
            outcome=exe.outcome,
            active_path=exe.active_path,
            parent_id=exe.parent_id,
            version=exe.version + 1,
            data=encode_execution(exe),
            updated_at=time.time(),
            receipt=token,
            id=exe.id,
            expected=exe.version,
        )
        if conn.execute(statement.sql, statement.params).rowcount != 1:
            raise RuntimeError("the narrow UPDATE missed: the bench's summary changed")
        exe.version += 1

    def store_sql_kept(i: int) -> None:
        exe = rows["kept"]
        exe.context["n"] = i
        statement = kept[receipt_slot(exe.version + 1)].bind(
            version=exe.version + 1,
            data=encode_execution(exe),
            updated_at=time.time(),
            receipt=token,  # every receipt is this token, so the fence always holds
            id=exe.id,
            expected=exe.version,
            base=token,
        )
        if conn.execute(statement.sql, statement.params).rowcount != 1:
            raise RuntimeError("the document-only UPDATE missed: the bench's fence changed")
        exe.version += 1

    def scan(i: int) -> None:
        rows["scan"].context["n"] = i
        execution_ok(rows["scan"])

    def envelope(i: int) -> None:
        exe = rows["envelope"]
        exe.context["n"] = i
        stored_as(exe, bump_and_prepare(exe, ([], None, (), (), None), MAX_DOCUMENT_BYTES))

    def commit(i: int) -> None:
        rows["store"].context["n"] = i
        store.commit(rows["store"], [])

    plain = execution("anatomy-plain")
    try:
        with plain_raw(harness) as write:
            assert write is not None
            loops: dict[str, Callable[[int], None]] = {
                "pydantic": _pydantic_loop(plain),
                "plain raw": _plain_loop(plain, write),
                "encode": encode,
                "raw": raw_update,
                "store SQL": store_sql,
                "store SQL kept": store_sql_kept,
                "scan": scan,
                "envelope": envelope,
                "store": commit,
            }
            return _timed(loops, seconds, rounds)
    finally:
        conn.close()
        store.close()


def commit_anatomy(harness: StoreHarness, seconds: float, rounds: int) -> dict[str, float]:
    """Microseconds per call of the loops every backend has (best of ``rounds`` interleaved
    samples, each loop on an execution of its own): ``encode``, ``raw`` (encode + the harness's
    ``raw_commit()``: one CAS write of the store's own record), ``store``
    (``store.commit(exe, [])``) and, where :mod:`plain` knows the backend, ``pydantic`` and
    ``plain raw``.  Empty when the harness has no raw write."""
    raw_write = harness.raw_commit()
    if raw_write is None:
        return {}
    return _write_anatomy(harness, raw_write, "raw", seconds, rounds)


def _write_anatomy(
    harness: StoreHarness,
    raw_write: Callable[[str, int, str], None],
    raw_name: str,
    seconds: float,
    rounds: int,
) -> dict[str, float]:
    """``encode``, ``raw_name`` (encode + ``raw_write(id, version, document)``), ``store`` and,
    where :mod:`plain` knows the backend, ``pydantic`` and ``plain raw``: µs per call."""
    store: Any = harness.open_sync()
    rows = {name: execution(f"anatomy-{raw_name}-{name}") for name in ("plain", "raw", "store")}
    for name in ("raw", "store"):
        store.commit(rows[name], [])

    def encode(i: int) -> None:
        rows["raw"].context["n"] = i
        encode_execution(rows["raw"])

    def raw(i: int) -> None:
        exe = rows["raw"]
        exe.context["n"] = i
        raw_write(exe.id, exe.version, encode_execution(exe))
        exe.version += 1

    def commit(i: int) -> None:
        rows["store"].context["n"] = i
        store.commit(rows["store"], [])

    try:
        with plain_raw(harness) as write:
            loops: dict[str, Callable[[int], None]] = {
                "encode": encode,
                raw_name: raw,
                "store": commit,
            }
            if write is not None:
                loops["pydantic"] = _pydantic_loop(rows["plain"])
                loops["plain raw"] = _plain_loop(rows["plain"], write)
            return _timed(loops, seconds, rounds)
    finally:
        store.close()
