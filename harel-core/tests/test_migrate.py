"""``harel.migrate`` over the memory store: what moves, what is skipped, refused, verified,
dry runs, progress, and the ``harel migrate`` command run in this process."""

from __future__ import annotations

import io
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest
from harel.cli import main
from harel.migrate import (
    Difference,
    MigrationConflict,
    MigrationError,
    MigrationReport,
    Progress,
    TerminalLine,
    VerificationFailed,
    migrate,
    source_ids,
    verify,
)
from harel.migrate.rehearsal import populate, rehearse
from harel.model import Event, Execution
from harel.registry import open_store
from harel.store.common.records import record_digest
from harel.store.contract import ExecutionRecord, ExecutionStore, TimerOp
from harel.store.errors import PayloadTooLarge
from harel.store.memory import DictStore

ROOTS = ("done", "placed", "forked", "paying", "shipping", "spawning", "customer")


@pytest.fixture
def urls(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """Two named in-process memory datasets (the CLI, run in this process, opens them too)."""
    for var in ("HAREL_LOAD_PLUGINS", "HAREL_DISABLE_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    tag = uuid.uuid4().hex
    yield f"memory://migrate-src-{tag}", f"memory://migrate-dst-{tag}"


def _digests(store: ExecutionStore, ids: tuple[str, ...]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for key in ids:
        record = store.export_execution(key)
        out[key] = None if record is None else record_digest(record)
    return out


def test_the_population_has_every_kind_of_record() -> None:
    src = DictStore()
    populate(src, scale=1)
    ids = source_ids(src)
    assert {key.split("-")[0] for key in ids.ids} >= set(ROOTS)
    assert ids.relay_only == {"spawning-0:Fulfilment.Payment:0"}
    assert src.due_timers(1e12), "armed timers"
    assert src.pending_spawns() and src.pending_outbox(), "pending relays"
    assert any(":" in key for key in ids.ids), "orthogonal children"


def test_migrate_moves_everything_and_verifies() -> None:
    src, dst = DictStore(), DictStore()
    populate(src, scale=2)
    ids = source_ids(src)
    report = migrate(src, dst)
    assert report.ok, report.summary()
    assert sorted(report.moved_ids) == sorted(ids.ids)
    assert report.moved.relay_only == 2 and report.moved.timers > 0 and report.moved.spawns > 0
    assert report.verification is not None and report.verification.ok
    assert report.verification.checked == len(ids.ids)
    assert report.verification.source == report.verification.destination
    assert _digests(src, ids.ids) == _digests(dst, ids.ids)
    report.check()


def test_a_second_run_moves_nothing() -> None:
    src, dst = DictStore(), DictStore()
    populate(src)
    first = migrate(src, dst)
    again = migrate(src, dst)
    assert again.moved_ids == [] and again.ok
    assert sorted(again.already_there) == sorted(first.moved_ids)
    assert len(dst.pending_outbox()) == len(src.pending_outbox()), "relays not doubled"
    assert len(dst.pending_spawns()) == len(src.pending_spawns())


def test_the_runner_finishes_on_the_destination_as_on_the_source() -> None:
    result = rehearse(DictStore(), DictStore(), scale=2)
    assert result.problems == [] and result.records > 10


def test_a_rehearsal_notices_a_lost_timer() -> None:
    class LosesTimers(DictStore):
        def import_execution(self, record: ExecutionRecord) -> None:
            super().import_execution(replace(record, timers=()))

    problems = rehearse(DictStore(), LosesTimers()).problems
    assert any("timers" in problem for problem in problems), problems


def test_a_conflicting_destination_record_is_refused_and_left_alone() -> None:
    src, dst = DictStore(), DictStore()
    populate(src)
    dst.commit(Execution(id="placed-0", definition_id="other"), [])
    before = dst.export_execution("placed-0")
    report = migrate(src, dst)
    assert report.conflicts == ["placed-0"]
    assert not report.ok
    assert dst.export_execution("placed-0") == before
    assert report.verification is not None
    assert [d.execution_id for d in report.verification.differences] == ["placed-0"]
    with pytest.raises(MigrationConflict, match="placed-0") as caught:
        report.check()
    assert caught.value.ids == ["placed-0"]
    assert "placed-0" not in report.moved_ids and len(report.moved_ids) > 1


def test_a_relay_only_record_with_other_entries_is_a_conflict() -> None:
    src, dst = DictStore(), DictStore()
    populate(src)
    target = "spawning-0:Fulfilment.Payment:0"
    carrier = Execution(id="carrier", definition_id="x")
    dst.commit(carrier, [(target, Event(id="other", kind="Pay"))])
    report = migrate(src, dst, check=False)
    assert report.conflicts == [target]
    assert [entry.event.id for entry in dst.pending_outbox()] == ["other"] + [
        entry.event.id for entry in src.pending_outbox() if entry.target_id != target
    ]


def test_dry_run_writes_nothing_and_counts_what_would_move() -> None:
    src, dst = DictStore(), DictStore()
    populate(src)
    dst.commit(Execution(id="done-0", definition_id="other"), [])
    ids = source_ids(src)
    report = migrate(src, dst, dry_run=True)
    assert report.dry_run and report.verification is None
    assert report.conflicts == ["done-0"]
    assert len(report.moved_ids) == len(ids.ids) - 1
    assert [item.id for item in dst.list_executions().items] == ["done-0"]
    assert dst.pending_outbox() == [] and dst.pending_spawns() == []
    assert report.summary().startswith(f"would move {len(ids.ids) - 1} record(s)")


def test_verify_names_the_records_and_sets_that_differ() -> None:
    src, dst = DictStore(), DictStore()
    populate(src)
    migrate(src, dst)
    exe = dst.load("placed-0")
    assert exe is not None
    exe.context["changed"] = True
    dst.commit(exe, [], timers=[TimerOp.cancel("Placed")])
    report = verify(src, dst)
    assert not report.ok
    assert report.differences == [Difference("placed-0", ("execution", "timers"))]
    assert "placed-0 (execution, timers)" in report.summary()
    with pytest.raises(VerificationFailed, match="placed-0"):
        MigrationReport(verification=report).check()


def test_verify_reports_a_missing_record_and_extra_destination_executions() -> None:
    src, dst = DictStore(), DictStore()
    populate(src)
    migrate(src, dst)
    dst.purge("done-0")
    dst.commit(Execution(id="zzz-extra", definition_id="x"), [])
    report = verify(src, dst)
    assert report.differences == [Difference("done-0", ("missing",))]
    assert report.only_in_destination == 1


def test_untargeted_outbox_entries_are_counted_not_moved() -> None:
    src, dst = DictStore(), DictStore()
    src.commit(Execution(id="a", definition_id="x"), [(None, Event(id="loose", kind="Go"))])
    report = migrate(src, dst)
    assert report.untargeted_outbox == 1
    assert report.moved_ids == ["a"] and report.ok
    assert dst.pending_outbox() == []
    assert "1 untargeted outbox" in report.summary()


def test_a_destination_keeping_fewer_trace_steps_still_verifies_and_resumes() -> None:
    src, dst = DictStore(), DictStore()
    populate(src)
    dst.trace_max = 2
    first = migrate(src, dst)
    assert first.ok, first.summary()
    record = dst.export_execution("done-0")
    assert record is not None and [step["index"] for step in record.trace] == [3, 4]
    assert migrate(src, dst).moved_ids == []


def test_the_same_store_object_is_refused() -> None:
    store = DictStore()
    with pytest.raises(ValueError, match="same store"):
        migrate(store, store)


def test_progress_is_reported_per_record_and_drawn_on_one_line() -> None:
    src, dst = DictStore(), DictStore()
    populate(src)
    seen: list[Progress] = []
    migrate(src, dst, progress=seen.append)
    total = len(source_ids(src).ids)
    phases = [p.phase for p in seen]
    assert phases == ["migrate"] * total + ["verify"] * total
    assert seen[total - 1] == Progress("migrate", total, total, total, 0, 0)
    stream, ticks = io.StringIO(), iter(range(1000))
    line = TerminalLine(stream, interval=0.5, clock=lambda: float(next(ticks)))
    for progress in seen:
        line(progress)
    line.close()
    text = stream.getvalue()
    assert f"migrate: {total}/{total} records" in text and f"{total} moved" in text
    assert f"verify: {total}/{total} records" in text
    assert text.count("\n") == 2 and "\r" in text


def test_cli_migrates_then_a_rerun_skips(
    urls: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    src_url, dst_url = urls
    populate(open_store(src_url))
    total = len(source_ids(open_store(src_url)).ids)
    assert main(["migrate", src_url, dst_url]) == 0
    out, err = capsys.readouterr()
    assert err == "", "quiet when stderr is not a terminal"
    lines = out.splitlines()
    assert lines[0].startswith(f"moved {total} record(s)") and src_url in lines[0]
    counts = verify(open_store(src_url), open_store(dst_url)).source.describe()
    assert lines[1] == f"verified {total} record(s) ({counts}): all equal"
    assert main(["migrate", src_url, dst_url]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith("moved 0 record(s)") and f"{total} already in the destination" in out


def test_cli_refuses_a_conflict_with_exit_1(
    urls: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    src_url, dst_url = urls
    populate(open_store(src_url))
    dst = open_store(dst_url)
    dst.commit(Execution(id="forked-0", definition_id="other"), [])
    before = record_digest(dst.export_execution("forked-0"))  # type: ignore[arg-type]
    assert main(["migrate", src_url, dst_url]) == 1
    out, err = capsys.readouterr()
    assert "harel migrate: refused forked-0" in err
    assert "harel migrate: differs: forked-0 (execution, processed, trace)" in err
    assert "1 conflicting (refused, destination left as is): forked-0" in out
    assert record_digest(dst.export_execution("forked-0")) == before  # type: ignore[arg-type]


def test_cli_dry_run_writes_nothing(
    urls: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    src_url, dst_url = urls
    populate(open_store(src_url))
    assert main(["migrate", "--dry-run", src_url, dst_url]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith("would move ") and "verified" not in out
    dst = open_store(dst_url)
    assert dst.list_executions().items == [] and dst.pending_outbox() == []


def test_cli_verify_only_detects_a_changed_record(
    urls: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    src_url, dst_url = urls
    populate(open_store(src_url))
    assert main(["migrate", src_url, dst_url]) == 0
    assert main(["migrate", "--verify-only", src_url, dst_url]) == 0
    dst = open_store(dst_url)
    exe = dst.load("shipping-0")
    assert exe is not None
    dst.commit(exe, [])
    capsys.readouterr()
    assert main(["migrate", "--verify-only", src_url, dst_url]) == 3
    out, err = capsys.readouterr()
    assert "differs: shipping-0 (execution)" in err
    assert "1 differ: shipping-0 (execution)" in out


def test_cli_refuses_the_same_url_and_redacts_urls(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "memory://a", "memory://a"]) == 2
    assert "same store" in capsys.readouterr().err
    secret = "nosuchscheme://user:hunter2@127.0.0.1:1/db"
    assert main(["migrate", "memory://a", secret]) == 2
    out, err = capsys.readouterr()
    assert "hunter2" not in out + err and "harel: error:" in err


def test_help_says_the_migration_is_offline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--help"]) == 0
    assert "STOP EVERY WORKER ON THE SOURCE FIRST" in " ".join(capsys.readouterr().out.split())


def test_a_store_without_records_is_named() -> None:
    class OldStore:
        """A store of a backend built before execution records."""

    with pytest.raises(MigrationError, match=r"destination store \(OldStore\) has no export"):
        migrate(DictStore(), OldStore())  # type: ignore[arg-type]
    with pytest.raises(MigrationError, match=r"source store \(OldStore\)"):
        verify(OldStore(), DictStore())  # type: ignore[arg-type]


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_cli_draws_progress_on_a_terminal_only(
    urls: tuple[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    src_url, dst_url = urls
    populate(open_store(src_url))
    total = len(source_ids(open_store(src_url)).ids)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["migrate", src_url, dst_url]) == 0
    drawn = terminal.getvalue()
    assert f"\r\x1b[Kmigrate: {total}/{total} records" in drawn
    assert f"\r\x1b[Kverify: {total}/{total} records" in drawn and drawn.endswith("\n")
    assert capsys.readouterr().out.startswith(f"moved {total} record(s)")


def test_a_record_the_destination_rejects_is_listed_and_the_rest_moves() -> None:
    class Small(DictStore):
        def import_execution(self, record: ExecutionRecord) -> None:
            if record.execution_id == "done-0":
                raise PayloadTooLarge("the document exceeds 8 bytes;\n  raise the limit")
            super().import_execution(record)

    src, dst = DictStore(), Small()
    populate(src)
    report = migrate(src, dst)
    assert report.rejected == {"done-0": "the document exceeds 8 bytes; raise the limit"}
    assert dst.load("done-0") is None and dst.load("placed-0") is not None
    assert "1 rejected by the destination: done-0 (the document" in report.summary()
    with pytest.raises(MigrationConflict, match="refused by the destination: done-0"):
        report.check()
