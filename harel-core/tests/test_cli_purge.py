"""``harel purge``: by id, by status and age (paging through the listing), dry runs, refusals."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import pytest
from harel.cli import main
from harel.cli.purge import PAGE, parse_age
from harel.model import Event, Execution, Status
from harel.store.contract import TimerOp
from harel.store.memory import DictStore

DAY = 86400.0


@pytest.fixture
def url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A named in-process memory dataset the CLI (run in this process) opens too."""
    for var in ("HAREL_LOAD_PLUGINS", "HAREL_DISABLE_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    yield f"memory://purge-{uuid.uuid4().hex}"


def _commit(
    store: DictStore,
    execution_id: str,
    status: Status,
    monkeypatch: pytest.MonkeyPatch,
    age: float = 0.0,
) -> None:
    """One execution with a mark, a timer and a trace step, last committed ``age`` ago."""
    with monkeypatch.context() as patch:
        if age:
            moment = time.time() - age
            patch.setattr(time, "time", lambda: moment)
        store.commit(
            Execution(id=execution_id, definition_id="flow", status=status),
            [(execution_id, Event(id=f"{execution_id}-e", kind="Go"))],
            processed_event_id=f"{execution_id}-in",
            timers=(TimerOp.schedule("/t", 5.0),),
            trace={"event_kind": "Start"},
        )


def _ids(store: DictStore) -> set[str]:
    return {item.id for item in store.list_executions(limit=10_000).items}


def test_parse_age() -> None:
    assert parse_age("30d") == 30 * DAY
    assert parse_age("12h") == 12 * 3600
    assert parse_age("1d12h") == 1.5 * DAY
    assert parse_age(" 90M ") == 5400
    assert parse_age("2w") == 14 * DAY
    assert parse_age("0.5s") == 0.5
    for bad in ("", "30", "d", "30x", "-1d", "1d 2h", "ten days"):
        with pytest.raises(Exception, match="not an age"):
            parse_age(bad)


def test_purge_by_id(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = DictStore.from_url(url)
    _commit(store, "done-1", Status.DONE, monkeypatch)
    _commit(store, "kept", Status.DONE, monkeypatch)
    assert main(["purge", "--store", url, "--id", "done-1"]) == 0
    out = capsys.readouterr().out
    assert "purged done-1 (DONE, version 1)" in out
    assert out.rstrip().endswith("purged 1 execution(s)")
    assert store.load("done-1") is None
    assert store.is_processed("done-1", "done-1-in") is False
    assert [t[0] for t in store.due_timers(1e18)] == ["kept"]
    assert _ids(store) == {"kept"}


def test_dry_run_changes_nothing(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = DictStore.from_url(url)
    _commit(store, "done-1", Status.DONE, monkeypatch)
    assert main(["purge", "--store", url, "--id", "done-1", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would purge done-1 (DONE, version 1)" in out
    assert "would purge 1 execution(s)" in out
    assert store.load("done-1") is not None
    assert store.read_trace("done-1") != []


def test_unfinished_needs_force(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = DictStore.from_url(url)
    _commit(store, "busy", Status.RUNNING, monkeypatch)
    assert main(["purge", "--store", url, "--id", "busy"]) == 1
    captured = capsys.readouterr()
    assert "busy is RUNNING, not finished; --force purges it anyway" in captured.err
    assert "purged 0 execution(s)" in captured.out
    assert store.load("busy") is not None
    assert main(["purge", "--store", url, "--id", "busy", "--force"]) == 0
    assert "purged busy (RUNNING, version 1)" in capsys.readouterr().out
    assert store.load("busy") is None


def test_unknown_id_says_so(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    DictStore.from_url(url)
    assert main(["purge", "--store", url, "--id", "nobody", "--id", "nobody-else"]) == 1
    err = capsys.readouterr().err
    assert "nobody is not stored" in err and "nobody-else is not stored" in err


def test_purge_by_status_and_age(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = DictStore.from_url(url)
    _commit(store, "old-done", Status.DONE, monkeypatch, age=10 * DAY)
    _commit(store, "old-failed", Status.FAILED, monkeypatch, age=10 * DAY)
    _commit(store, "old-running", Status.RUNNING, monkeypatch, age=10 * DAY)
    _commit(store, "new-done", Status.DONE, monkeypatch, age=DAY)
    args = ["purge", "--store", url, "--status", "DONE", "--older-than", "7d"]
    assert main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would purge old-done (DONE, last commit " in out
    assert "new-done" not in out and "old-failed" not in out
    assert len(_ids(store)) == 4
    assert main(args) == 0
    assert "purged 1 execution(s)" in capsys.readouterr().out
    assert _ids(store) == {"old-failed", "old-running", "new-done"}
    # several statuses, lower case accepted; the recent one stays
    assert main([*args[:4], "failed", "--status", "done", "--older-than", "12h"]) == 0
    assert _ids(store) == {"old-running"}
    capsys.readouterr()
    # unfinished ones only with --force
    running = ["purge", "--store", url, "--status", "RUNNING", "--older-than", "1d"]
    assert main(running) == 1
    assert "old-running is RUNNING, not finished" in capsys.readouterr().err
    assert main([*running, "--force"]) == 0
    assert _ids(store) == set()


def test_age_selection_pages_through_the_listing(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = DictStore.from_url(url)
    total = 2 * PAGE + 17
    for n in range(total):
        status = Status.DONE if n % 3 else Status.RUNNING
        _commit(store, f"exe-{n:04d}", status, monkeypatch, age=40 * DAY)
    done = {f"exe-{n:04d}" for n in range(total) if n % 3}
    assert main(["purge", "--store", url, "--status", "DONE", "--older-than", "30d"]) == 0
    assert f"purged {len(done)} execution(s)" in capsys.readouterr().out
    assert _ids(store) == {f"exe-{n:04d}" for n in range(total)} - done


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "choose what to purge"),
        (["--id", "x", "--status", "DONE", "--older-than", "1d"], "choose what to purge"),
        (["--status", "DONE"], "--status and --older-than go together"),
        (["--older-than", "1d"], "--status and --older-than go together"),
    ],
)
def test_usage_errors(
    url: str, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["purge", "--store", url, *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--status", "DONE", "--older-than", "30x"], "is not an age"),
        (["--status", "FINISHED", "--older-than", "1d"], "is not a status"),
    ],
)
def test_bad_values_are_usage_errors(
    url: str, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["purge", "--store", url, *args]) == 2
    assert message in capsys.readouterr().err


def test_no_store_configured(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in list(os.environ):
        if var.startswith("STM_"):
            monkeypatch.delenv(var)
    assert main(["purge", "--id", "x"]) == 2
    assert "no store is configured" in capsys.readouterr().err


def test_secret_in_the_url_is_never_printed(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["purge", "--store", "nosuchscheme://user:s3cretPW@host/db", "--id", "x"])
    assert code == 2
    captured = capsys.readouterr()
    assert "s3cretPW" not in captured.out + captured.err
