"""What only jsondir has: its file names, its journal, its on-disk atomicity, its OS errors."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from harel import Event, Execution, StoreConflict, TimerOp
from harel.store.errors import (
    InvalidIdentifier,
    InvalidPayload,
    InvalidStoreURL,
    SchemaVersionError,
    StoreConfigError,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
)
from harel_example_jsondir import AsyncJsonDirStore, JsonDirStore, _files, _schema
from harel_example_jsondir._spec import parse_url
from harel_example_jsondir.testing import harness_from_url

AWKWARD_IDS = [
    'quote"d',
    "a/b/../../c",
    "..",
    ".",
    "colon:and$dollar",
    "back\\slash",
    "unicodé ☃ 雪",
    "UPPER",
    "upper",
    "new\nline",
    "x" * 1024,  # the longest id (MAX_ID_BYTES); 2.5k-character ids once bricked the store
    "𝄞" * 256,  # the longest astral-plane id
]
REFUSED_IDS = [
    "x" * 2500,
    "𝄞" * 16384,  # 64 KiB of UTF-8
    "nul\x00byte",
    "lone \ud800 surrogate",
]


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (but the lock file) with its bytes."""
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != _schema.LOCK
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


def test_any_accepted_id_gets_a_bounded_file_name_and_round_trips(store: JsonDirStore) -> None:
    for execution_id in AWKWARD_IDS:
        exe = Execution(id=execution_id, definition_id="d")
        store.commit(exe, [], execution_id, [TimerOp.schedule(execution_id, 1.0)], trace={})

    root = store.directory
    names = {p.relative_to(root).as_posix() for p in root.rglob("*.json")}
    assert names - {_schema.STATE} == {
        path(i) for i in AWKWARD_IDS for path in (_schema.document_path, _schema.trace_path)
    }
    assert all(_schema.is_store_file(name) for name in names)
    assert {p.name for p in root.iterdir()} == {
        _schema.LOCK,
        _schema.STATE,
        _schema.EXECUTIONS,
        _schema.TRACES,
    }
    reopened = JsonDirStore(root)
    for execution_id in AWKWARD_IDS:
        loaded = reopened.load(execution_id)
        assert loaded is not None and loaded.id == execution_id
        assert reopened.is_processed(execution_id, execution_id)
        assert reopened.read_trace(execution_id) == [{"index": 0}]
    assert sorted(s.id for s in reopened.list_executions(limit=100).items) == sorted(AWKWARD_IDS)
    assert sorted(t[1] for t in reopened.due_timers(1.0)) == sorted(AWKWARD_IDS)


@pytest.mark.parametrize("execution_id", REFUSED_IDS, ids=["2500", "64KiB", "nul", "surrogate"])
def test_unusable_ids_are_refused_before_anything_is_written(
    store: JsonDirStore, execution_id: str
) -> None:
    _seed(store)
    before = snapshot(store.directory)
    with pytest.raises(InvalidIdentifier):
        store.commit(Execution(id=execution_id, definition_id="d"), [], trace={})
    with pytest.raises(InvalidIdentifier):
        store.commit(Execution(id="ok", definition_id="d"), [(execution_id, Event(kind="k"))])
    with pytest.raises(InvalidIdentifier):
        store.load(execution_id)
    assert snapshot(store.directory) == before
    assert JsonDirStore(store.directory).load("seeded") is not None


def test_ids_differing_only_by_case_do_not_share_a_file(store: JsonDirStore) -> None:
    store.save(Execution(id="Case", definition_id="upper"))
    store.save(Execution(id="case", definition_id="lower"))
    assert store.load("Case").definition_id == "upper"  # type: ignore[union-attr]
    assert store.load("case").definition_id == "lower"  # type: ignore[union-attr]


# -- the journal ------------------------------------------------------------------------------


def _seed(store: JsonDirStore) -> Execution:
    exe = Execution(id="seeded", definition_id="d")
    store.commit(exe, [(None, Event(kind="first"))], "p0", [TimerOp.schedule("a", 1.0)], trace={})
    return exe


@pytest.mark.parametrize(
    "forged",
    [
        "../escaped.json",
        "{outside}",
        "executions/../../escaped.json",
        "traces/../../escaped.json",
    ],
)
def test_a_forged_journal_is_refused_whole_and_writes_nothing_outside(
    store: JsonDirStore, tmp_path: Path, forged: str
) -> None:
    _seed(store)
    outside = tmp_path / "escaped.json"
    forged = forged.format(outside=outside)
    journal = {
        "format": _schema.FORMAT,
        "files": [[_schema.STATE, "{}"], [forged, "pwned"]],
    }
    (store.directory / _schema.JOURNAL).write_text(json.dumps(journal))
    before = snapshot(store.directory)
    with pytest.raises(StoreCorrupted, match="not a file of this store"):
        store.load("seeded")
    assert not outside.exists()
    assert snapshot(store.directory) == before  # not even the valid entry was applied


def test_a_crash_after_the_commit_point_is_completed_by_the_next_operation(
    store: JsonDirStore,
) -> None:
    _seed(store)
    crashed = run_python(
        """
        import os, sys
        from harel import Event, TimerOp
        from harel_example_jsondir import JsonDirStore, _files
        real = _files.JsonDirectory._apply_one
        def write_then_die(self, relative, text):
            real(self, relative, text)
            if relative != "journal.json":
                os._exit(3)  # the process dies after the journal and one file
        _files.JsonDirectory._apply_one = write_then_die
        store = JsonDirStore(sys.argv[1])
        exe = store.load("seeded")
        exe.context["step"] = 2
        store.commit(exe, [(None, Event(id="e2", kind="second"))], "p1",
                     [TimerOp.cancel("a")], trace={"step": 2})
        """,
        str(store.directory),
    )
    assert crashed.returncode == 3, crashed.stderr
    assert (store.directory / _schema.JOURNAL).exists()

    exe = store.load("seeded")  # replays the journal first
    assert not (store.directory / _schema.JOURNAL).exists()
    assert exe is not None and exe.version == 2 and exe.context == {"step": 2}
    assert [e.event.id for e in store.pending_outbox()][-1] == "e2"
    assert store.is_processed("seeded", "p1")
    assert store.due_timers(10.0) == []
    assert [step["index"] for step in store.read_trace("seeded")] == [0, 1]


def test_a_purge_is_one_journaled_write(store: JsonDirStore) -> None:
    exe = _seed(store)
    exe.status = exe.status.DONE
    store.commit(exe, [], trace={})
    assert store.purge("seeded") is True
    assert snapshot(store.directory).keys() == {_schema.STATE}
    assert not (store.directory / _schema.JOURNAL).exists()


# -- failures leave the directory as it was -----------------------------------------------------


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


def test_a_full_disk_before_the_commit_point_is_retryable_and_changes_nothing(
    store: JsonDirStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = _seed(store)
    before = snapshot(store.directory)
    real_replace = os.replace

    def failing_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst).name == _schema.JOURNAL:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_replace(src, dst)

    monkeypatch.setattr(_files.os, "replace", failing_replace)
    with pytest.raises(StoreUnavailable, match="No space left on device; free disk space"):
        store.commit(exe, [(None, Event(kind="lost"))], "p1", [TimerOp.cancel("a")], trace={})
    assert exe.version == 1
    assert snapshot(store.directory) == before  # no temp file left either
    monkeypatch.undo()
    store.commit(exe, [(None, Event(kind="again"))])
    assert exe.version == 2


def test_temp_files_a_crash_left_behind_are_removed_on_open(store: JsonDirStore) -> None:
    _seed(store)
    before = snapshot(store.directory)
    stray = store.directory / _schema.EXECUTIONS / f"{_schema.TEMP_PREFIX}deadbeef"
    stray.write_text('{"torn": ')
    foreign = store.directory / "not-ours" / f"{_schema.TEMP_PREFIX}keep"
    foreign.parent.mkdir()
    foreign.write_text("someone else's")
    JsonDirStore(store.directory)
    assert not stray.exists()
    assert foreign.exists()
    foreign.unlink()
    foreign.parent.rmdir()
    assert snapshot(store.directory) == before


# -- damaged or foreign directories ------------------------------------------------------------


def test_a_directory_of_another_layout_format_is_refused_at_open(store: JsonDirStore) -> None:
    _seed(store)
    state = store.directory / _schema.STATE
    data = json.loads(state.read_text())
    data["format"] = 1
    state.write_text(json.dumps(data))
    with pytest.raises(SchemaVersionError, match="version 1"):
        JsonDirStore(store.directory)
    with pytest.raises(SchemaVersionError, match="version 1"):
        store.pending_outbox()


def test_a_damaged_document_fails_only_its_own_execution(store: JsonDirStore) -> None:
    _seed(store)
    store.save(Execution(id="healthy", definition_id="d"))
    (store.directory / _schema.document_path("seeded")).write_text('{"id": ')
    with pytest.raises(StoreCorrupted, match="document of execution 'seeded'"):
        store.load("seeded")
    assert store.load("healthy") is not None
    assert len(store.list_executions().items) == 2


def test_a_damaged_state_file_is_named(store: JsonDirStore) -> None:
    _seed(store)
    (store.directory / _schema.STATE).write_bytes(b"\xff\xfe")
    with pytest.raises(StoreCorrupted, match=_schema.STATE):
        store.pending_outbox()


def test_a_file_where_the_directory_belongs_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreConfigError, match="cannot be a jsondir directory"):
        JsonDirStore(tmp_path / "file")
    with pytest.raises(StoreConfigError, match="cannot be a jsondir directory"):
        JsonDirStore(tmp_path / "file" / "below")


def test_a_store_folder_linked_elsewhere_is_refused(tmp_path: Path) -> None:
    store = JsonDirStore(tmp_path / "data")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (store.directory / _schema.TRACES).rmdir()
    (store.directory / _schema.TRACES).symlink_to(elsewhere)
    with pytest.raises(StoreCorrupted, match="symbolic link"):
        JsonDirStore(store.directory)


def test_a_folder_where_a_file_belongs_is_reported_as_damage(store: JsonDirStore) -> None:
    (store.directory / _schema.document_path("x")).mkdir()
    with pytest.raises(StoreCorrupted):
        store.load("x")


# -- the async twin ---------------------------------------------------------------------------


def test_a_closed_async_store_refuses_with_a_store_error(tmp_path: Path) -> None:
    async def main() -> None:
        store = await AsyncJsonDirStore.from_url(f"jsondir://{tmp_path}")
        await store.close()
        await store.close()
        with pytest.raises(StoreError, match="is closed"):
            await store.load("x")

    asyncio.run(main())


# -- URLs, plugin, harness --------------------------------------------------------------------


def test_urls_absolute_relative_and_options(tmp_path: Path) -> None:
    absolute = parse_url(f"jsondir://{tmp_path}/a%20b?fsync=false&trace_max=5&lock_timeout=2")
    assert absolute.directory == tmp_path / "a b"
    assert (absolute.fsync, absolute.trace_max, absolute.lock_timeout) == (False, 5, 2.0)
    assert parse_url(absolute.url()) == absolute
    relative = parse_url("jsondir://Rel/Dir", trace_max=7)
    assert relative.directory == Path("Rel/Dir") and relative.trace_max == 7
    with pytest.raises(InvalidStoreURL, match="unknown option"):
        parse_url("jsondir:///x?colour=red")
    with pytest.raises(InvalidStoreURL, match="names no directory"):
        parse_url("jsondir://")
    with pytest.raises(InvalidStoreURL, match="is not a jsondir:// URL"):
        parse_url("sqlite:///x.db")


def test_from_url_creates_the_directory(tmp_path: Path) -> None:
    store = JsonDirStore.from_url(f"jsondir://{tmp_path}/new/nested?trace_max=2")
    assert store.trace_max == 2
    assert (tmp_path / "new" / "nested" / _schema.EXECUTIONS).is_dir()


def test_importing_the_plugin_loads_no_store_code() -> None:
    probe = run_python(
        """
        import sys
        import harel_example_jsondir._spec
        loaded = [m for m in sys.modules if m.startswith(("filelock", "harel_example_jsondir."))]
        print(sorted(loaded))
        """
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "['harel_example_jsondir._spec']"


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
    assert first.footprint("x") == ["execution", "index"]
    assert JsonDirStore.from_url(first.url()).load("x") is not None
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


def test_one_hand_damaged_relay_entry_does_not_stop_the_sweep(store: JsonDirStore) -> None:
    _seed(store)
    emits = [("next", Event(id="bad", kind="k")), ("next", Event(id="ok", kind="k"))]
    store.commit(Execution(id="next", definition_id="d"), emits)
    state = store.directory / _schema.STATE
    data = json.loads(state.read_text())
    data["outbox"][1][2] = '{"kind": '  # the "bad" entry, cut short by hand
    state.write_text(json.dumps(data))
    swept = [entry.event.kind for entry in store.pending_outbox()]
    assert swept == ["first", "k"]
    assert [entry.event.id for entry in JsonDirStore(store.directory).pending_outbox()][1] == "ok"
    assert store.load("next") is not None  # the execution itself is still served
    with pytest.raises(StoreCorrupted, match="outbox entry 2 of execution 'next' was quarantined"):
        store.export_execution("next")
