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
* ``store`` — ``SqliteStore.commit(exe, [])``.

``store`` minus ``store SQL`` is the store's own Python (plan, commit envelope, validation).
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
from harel.store.common import encode_execution, receipt_slot
from harel.store.common.sql import SQLITE, statements_for
from harel.store.common.sql.harness import RAW_UPDATE


def anatomy(harness: StoreHarness, seconds: float, rounds: int) -> dict[str, float]:
    """Microseconds per call of each loop (the best of ``rounds`` interleaved samples: the
    parts are differences of loops, which the machine's noise would otherwise swamp)."""
    store: Any = harness.open_sync()
    conn = sqlite3.connect(str(getattr(harness, "path")), isolation_level=None)  # noqa: B009
    conn.execute("PRAGMA synchronous = NORMAL")
    update = statements_for(SQLITE).update_state_at
    token = os.urandom(16).hex()  # a commit token (the store draws one per commit)
    rows = {name: execution(f"anatomy-{name}") for name in ("raw", "sql", "store")}
    for exe in rows.values():
        store.commit(exe, [])

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

    def commit(i: int) -> None:
        rows["store"].context["n"] = i
        store.commit(rows["store"], [])

    loops: dict[str, Callable[[int], None]] = {
        "encode": encode,
        "raw": raw_update,
        "store SQL": store_sql,
        "store": commit,
    }
    try:
        rates = interleaved(
            {name: partial(rate, step, seconds) for name, step in loops.items()}, rounds
        )
    finally:
        conn.close()
        store.close()
    return {name: 1e6 / value for name, value in rates.items()}
