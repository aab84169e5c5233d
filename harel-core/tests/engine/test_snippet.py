"""The acceptance snippet (engine.md top), run in a fresh interpreter on every installed backend.

``memory`` swaps the store line for ``DictStore()``, ``sqlite`` runs it exactly as written,
and every other backend runs on a fresh dataset its harness derives from its test URL
(``HAREL_TEST_<NAME>_URL`` or its ``local_url``; skipped, saying so, when it has none).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from harel.conformance import usable_backend_names

SNIPPET = """\
from harel import definition_from_dsl, DurableRunner, SqliteStore, Event
defn = definition_from_dsl("event Go {} machine m { initial A  state A {}  final Done success {}  from A to Done on Go }", "m")
store = SqliteStore(":memory:")
runner = DurableRunner(store, {defn.id: defn}, trace=True)
exe = runner.create(defn.id)
runner.process(exe.id, Event(kind="Go"))
for step in store.read_trace(exe.id):
    print(step["index"], step["event_kind"], step["from_path"], "->", step["to_path"])
"""  # noqa: E501
STORE_LINE = 'store = SqliteStore(":memory:")\n'
EXPECTED = "0 Start None -> A\n1 Go A -> Done\n"


def _source(backend: str, isolated_url: Callable[[str], str]) -> str:
    if backend == "sqlite":
        return SNIPPET
    if backend == "memory":
        return SNIPPET.replace(STORE_LINE, "from harel import DictStore\nstore = DictStore()\n")
    url = isolated_url(backend)
    line = f"from harel.registry import open_store\nstore = open_store({url!r})\n"
    return SNIPPET.replace(STORE_LINE, line)


def test_every_ok_backend_is_covered() -> None:
    assert {"memory", "sqlite"} <= set(usable_backend_names())


@pytest.mark.slow
@pytest.mark.parametrize("backend", usable_backend_names())
def test_snippet_prints_exactly_two_lines(
    backend: str, tmp_path: Path, isolated_url: Callable[[str], str]
) -> None:
    source = _source(backend, isolated_url)
    assert "SqliteStore" in source  # the import line is always the documented one
    done = subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == EXPECTED
