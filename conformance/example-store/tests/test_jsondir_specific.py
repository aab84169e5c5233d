"""What only jsondir has: its file names, its sharing across processes, its on-disk atomicity."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from harel import Event, Execution, StoreConflict, TimerOp
from harel.store.errors import InvalidPayload, InvalidStoreURL, SchemaVersionError
from harel_example_jsondir import AsyncJsonDirStore, JsonDirStore, _files, _layout
from harel_example_jsondir._url import parse_url
from harel_example_jsondir.testing import harness_from_url
from hypothesis import given
from hypothesis import strategies as st

AWKWARD_IDS = [
    'quote"d',
    "single'quote",
    "a/b/../../c",
    "..",
    ".",
    "colon:and$dollar",
    "space in it",
    "back\\slash",
    "unicodé ☃ 雪",
    "UPPER",
    "upper",
    "nul\x00byte",
    "new\nline",
    "x" * 600,
]
SAFE_COMPONENT = re.compile(r"[a-z2-7]{1,128}(\.json)?")


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (but the lock file) with its bytes."""
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != _layout.LOCK
    }


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a new interpreter (a second process over the same directory)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def store(tmp_path: Path) -> JsonDirStore:
    return JsonDirStore(tmp_path / "data")


# -- file names -----------------------------------------------------------------------------


def test_awkward_ids_get_safe_reversible_file_names(store: JsonDirStore) -> None:
    for execution_id in AWKWARD_IDS:
        exe = Execution(id=execution_id, definition_id="d")
        store.commit(exe, [], trace={"step": execution_id})

    root = store.directory
    documents = sorted((root / _layout.EXECUTIONS).rglob("*.json"))
    traces = sorted((root / _layout.TRACES).rglob("*.json"))
    assert len(documents) == len(traces) == len(AWKWARD_IDS)
    for path in [*documents, *traces]:
        relative = path.relative_to(root)
        assert all(SAFE_COMPONENT.fullmatch(part) for part in relative.parts[1:]), relative
    decoded = {_layout.id_from_path(p.relative_to(root).as_posix()) for p in documents}
    assert decoded == set(AWKWARD_IDS)
    # nothing was written outside the store's own folders
    assert {p.name for p in root.iterdir()} <= {
        _layout.LOCK,
        _layout.STATE,
        _layout.EXECUTIONS,
        _layout.TRACES,
    }
    for execution_id in AWKWARD_IDS:
        loaded = store.load(execution_id)
        assert loaded is not None and loaded.id == execution_id
        assert store.read_trace(execution_id) == [{"step": execution_id, "index": 0}]


def test_long_ids_are_split_into_short_components() -> None:
    name = _layout.encode_id("é" * 500)
    assert max(len(part) for part in name.split("/")) <= _layout.COMPONENT_CHARS
    assert name.count("/") >= 1
    assert _layout.decode_id(name) == "é" * 500


@given(st.text(min_size=1))
def test_file_names_round_trip_any_id(execution_id: str) -> None:
    name = _layout.encode_id(execution_id)
    assert all(SAFE_COMPONENT.fullmatch(part) for part in name.split("/"))
    assert _layout.decode_id(name) == execution_id
    assert _layout.id_from_path(_layout.document_path(execution_id)) == execution_id


def test_ids_differing_only_by_case_do_not_share_a_file(store: JsonDirStore) -> None:
    store.save(Execution(id="Case", definition_id="upper"))
    store.save(Execution(id="case", definition_id="lower"))
    assert _layout.encode_id("Case").lower() != _layout.encode_id("case").lower()
    assert store.load("Case").definition_id == "upper"  # type: ignore[union-attr]
    assert store.load("case").definition_id == "lower"  # type: ignore[union-attr]


# -- several processes ------------------------------------------------------------------------


def test_a_second_process_sees_the_data_and_writes_back(store: JsonDirStore) -> None:
    exe = Execution(id="shared", definition_id="d", context={"n": 1})
    store.commit(exe, [("other", Event(id="e1", kind="ping"))], timers=[TimerOp.schedule("t", 2.5)])

    child = run_python(
        """
        import json, sys
        from harel_example_jsondir import JsonDirStore
        store = JsonDirStore.from_url("jsondir://" + sys.argv[1])
        exe = store.load("shared")
        outbox = store.pending_outbox()
        print(json.dumps({
            "version": exe.version,
            "context": exe.context,
            "outbox": [[e.target_id, e.event.id] for e in outbox],
            "timers": store.due_timers(10.0),
        }))
        exe.context["n"] = 2
        store.commit(exe, [], processed_event_id="e1")
        store.ack_outbox(outbox[0].seq)
        """,
        str(store.directory),
    )
    assert child.returncode == 0, child.stderr
    seen = json.loads(child.stdout)
    assert seen == {
        "version": 1,
        "context": {"n": 1},
        "outbox": [["other", "e1"]],
        "timers": [["shared", "t", 2.5]],
    }
    again = store.load("shared")
    assert again is not None and again.version == 2 and again.context == {"n": 2}
    assert store.is_processed("shared", "e1")
    assert store.pending_outbox() == []


def test_processes_racing_on_one_execution_lose_no_update(store: JsonDirStore) -> None:
    store.save(Execution(id="counter", definition_id="d", context={"n": 0}))
    worker = """
        import sys
        from harel import StoreConflict
        from harel_example_jsondir import JsonDirStore
        store = JsonDirStore(sys.argv[1], fsync=False)
        done = 0
        while done < 10:
            exe = store.load("counter")
            exe.context["n"] += 1
            try:
                store.commit(exe, [])
            except StoreConflict:
                continue
            done += 1
        """
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(worker), str(store.directory)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    final = store.load("counter")
    assert final is not None
    assert final.context == {"n": 30}
    assert final.version == 31


# -- atomicity on disk ---------------------------------------------------------------------


def _seed(store: JsonDirStore) -> Execution:
    exe = Execution(id="seeded", definition_id="d")
    store.commit(exe, [(None, Event(kind="first"))], "p0", [TimerOp.schedule("a", 1.0)], trace={})
    return exe


def test_a_commit_with_an_unencodable_value_leaves_the_directory_unchanged(
    store: JsonDirStore,
) -> None:
    exe = _seed(store)
    before = snapshot(store.directory)
    exe.context["bad"] = object()
    with pytest.raises(InvalidPayload):
        store.commit(exe, [(None, Event(kind="lost"))], "p1", [TimerOp.cancel("a")], trace={})
    assert exe.version == 1
    assert snapshot(store.directory) == before


def test_a_lost_cas_leaves_the_directory_unchanged(store: JsonDirStore) -> None:
    _seed(store)
    before = snapshot(store.directory)
    stale = Execution(id="seeded", definition_id="d")
    with pytest.raises(StoreConflict) as info:
        store.commit(stale, [(None, Event(kind="lost"))], "p1", trace={"x": 1})
    assert (info.value.expected, info.value.found) == (0, 1)
    assert stale.version == 0
    assert snapshot(store.directory) == before


def test_a_disk_failure_before_the_commit_point_leaves_the_directory_unchanged(
    store: JsonDirStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = _seed(store)
    before = snapshot(store.directory)
    real_replace = os.replace

    def failing_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst).name == _layout.JOURNAL:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(_files.os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left"):
        store.commit(exe, [(None, Event(kind="lost"))], "p1", [TimerOp.cancel("a")], trace={})
    assert exe.version == 1
    assert snapshot(store.directory) == before  # no temp file left either


def test_a_crash_after_the_commit_point_is_completed_by_the_next_operation(
    store: JsonDirStore,
) -> None:
    _seed(store)
    crashed = run_python(
        """
        import os, sys
        from harel import Event, TimerOp
        from harel_example_jsondir import JsonDirStore, _files
        real = _files.JsonDirectory.write_atomic
        def write_then_die(self, relative, text):
            real(self, relative, text)
            if relative != "journal.json":
                os._exit(3)  # the process dies after the journal and one file
        _files.JsonDirectory.write_atomic = write_then_die
        store = JsonDirStore(sys.argv[1])
        exe = store.load("seeded")
        exe.context["step"] = 2
        store.commit(exe, [(None, Event(id="e2", kind="second"))], "p1",
                     [TimerOp.cancel("a")], trace={"step": 2})
        """,
        str(store.directory),
    )
    assert crashed.returncode == 3, crashed.stderr
    assert (store.directory / _layout.JOURNAL).exists()

    exe = store.load("seeded")  # replays the journal first
    assert not (store.directory / _layout.JOURNAL).exists()
    assert exe is not None and exe.version == 2 and exe.context == {"step": 2}
    assert [e.event.id for e in store.pending_outbox()][-1] == "e2"
    assert store.is_processed("seeded", "p1")
    assert store.due_timers(10.0) == []
    assert [step["index"] for step in store.read_trace("seeded")] == [0, 1]


def test_temp_files_a_crash_left_behind_are_removed_on_open(store: JsonDirStore) -> None:
    _seed(store)
    before = snapshot(store.directory)
    stray = store.directory / _layout.EXECUTIONS / f"{_layout.TEMP_PREFIX}deadbeef"
    stray.write_text('{"torn": ')
    JsonDirStore(store.directory)
    assert not stray.exists()
    assert snapshot(store.directory) == before


def test_a_directory_of_another_layout_format_is_refused(store: JsonDirStore) -> None:
    _seed(store)
    state = store.directory / _layout.STATE
    data = json.loads(state.read_text())
    data["format"] = 99
    state.write_text(json.dumps(data))
    with pytest.raises(SchemaVersionError, match="format 99"):
        store.pending_outbox()


# -- URLs, async twin, harness ----------------------------------------------------------------


def test_urls_absolute_relative_and_options(tmp_path: Path) -> None:
    absolute = parse_url(f"jsondir://{tmp_path}/a%20b?fsync=false&trace_max=5&lock_timeout=2")
    assert absolute.directory == tmp_path / "a b"
    assert (absolute.fsync, absolute.trace_max, absolute.lock_timeout) == (False, 5, 2.0)
    relative = parse_url("jsondir://Rel/Dir", trace_max=7)
    assert relative.directory == Path("Rel/Dir") and relative.trace_max == 7
    with pytest.raises(InvalidStoreURL, match="unknown option"):
        parse_url("jsondir:///x?colour=red")
    with pytest.raises(InvalidStoreURL, match="names no directory"):
        parse_url("jsondir://")
    with pytest.raises(InvalidStoreURL, match="not a jsondir URL"):
        parse_url("sqlite:///x.db")


def test_from_url_creates_the_directory(tmp_path: Path) -> None:
    store = JsonDirStore.from_url(f"jsondir://{tmp_path}/new/nested?trace_max=2")
    assert store.trace_max == 2
    assert (tmp_path / "new" / "nested" / _layout.EXECUTIONS).is_dir()


def test_sync_and_async_stores_share_one_directory(tmp_path: Path) -> None:
    sync_store = JsonDirStore(tmp_path)
    sync_store.save(Execution(id="x", definition_id="d"))

    async def main() -> int:
        async_store = await AsyncJsonDirStore.from_url(f"jsondir://{tmp_path}")
        exe = await async_store.load("x")
        assert exe is not None
        await async_store.commit(exe, [(None, Event(kind="k"))])
        return exe.version

    assert anyio.run(main) == 2
    assert sync_store.load("x").version == 2  # type: ignore[union-attr]
    assert len(sync_store.pending_outbox()) == 1


def test_harness_from_url_uses_a_fresh_folder_inside_the_url_directory(tmp_path: Path) -> None:
    keep = tmp_path / "user-data.txt"
    keep.write_text("not ours")
    first = harness_from_url(f"jsondir://{tmp_path}", tmp_path / "work")
    second = harness_from_url(f"jsondir://{tmp_path}", tmp_path / "work")
    assert first.directory.parent == tmp_path and first.directory != second.directory
    store = first.open_sync()
    assert store.list_executions().items == []
    store.save(Execution(id="x", definition_id="d"))
    assert second.open_sync().load("x") is None
    first.destroy()
    second.destroy()
    assert not first.directory.exists()
    assert keep.read_text() == "not ours"


def test_the_registry_finds_jsondir_through_its_entry_point(tmp_path: Path) -> None:
    from harel.registry import get_backend, harness_for_url, open_store

    backend = get_backend("jsondir")
    assert backend.distribution == "harel-example-jsondir"
    assert backend.capabilities == JsonDirStore.capabilities
    store = open_store(f"jsondir://{tmp_path / 'via-registry'}")
    assert isinstance(store, JsonDirStore)
    harness = harness_for_url(f"jsondir://{tmp_path}", tmp_path / "work")
    assert harness.describe().startswith("jsondir at ")
    harness.destroy()
