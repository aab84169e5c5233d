"""``harel run/trace/list/send/worker`` (in-process through ``harel.cli.main``) and the demo."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from harel.cli import main
from harel.demo import run_demo
from harel.examples import ORDER_STM

pytest.importorskip("harel_store_sqlite", reason="harel-store-sqlite not installed")

GO = "event Go {} machine m { initial A  state A {}  final Done success {}  from A to Done on Go }"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("STM_STORE_URL", "STM_STORE_BACKEND", "STM_STORE_DB", "STM_TRACE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("STM_TRACE_MAX", raising=False)
    monkeypatch.delenv("STM_DEFINITIONS_DIR", raising=False)


@pytest.fixture
def defs(tmp_path: Path) -> Path:
    directory = tmp_path / "defs"
    directory.mkdir()
    shutil.copy(ORDER_STM, directory / "order.stm")
    (directory / "m.stm").write_text(GO)
    return directory


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_prints_timeline_in_memory(capsys: pytest.CaptureFixture[str], defs: Path) -> None:
    code, out, err = run(capsys, "run", str(defs / "m.stm"), "-e", "Go", "--id", "x")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "execution x (m): DONE/success at Done, version 2"
    assert lines[1].split() == ["0", "Start", "-", "->", "A"]
    assert lines[2].split() == ["1", "Go", "A", "->", "Done"]


def test_run_send_trace_list_on_sqlite(
    capsys: pytest.CaptureFixture[str], defs: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    order = str(defs / "order.stm")
    code, out, _ = run(capsys, "run", order, "--store", url, "--id", "o", "-e", "Confirm")
    assert code == 0 and "execution o (order): RUNNING at Fulfilment" in out
    assert "region o:Fulfilment.Payment:0: RUNNING at Fulfilment.Payment.Charging" in out

    monkeypatch.setenv("STM_TRACE", "on")
    args = ("--store", url, "--definitions", str(defs))
    pay = ("send", "o", "Pay", "--data", '{"amount": 2}', "--event-id", "py", *args)
    code, out, _ = run(capsys, *pay)
    assert code == 0 and out.startswith("o: RUNNING at Fulfilment, version 3")
    code, again, _ = run(capsys, *pay)
    assert again == out  # same event id: deduplicated in the live region
    code, out, _ = run(capsys, "send", "o", "Pack", *args)
    assert code == 0 and out.startswith("o: RUNNING at Shipping, version 4")

    code, out, _ = run(capsys, "trace", "o", "--store", url)
    assert code == 0
    assert [line.split()[1] for line in out.splitlines()[1:]] == [
        "Start",
        "Confirm",
        "Finished",
        "Finished",
    ]
    assert out.splitlines()[-1].endswith("[join all]")

    code, out, _ = run(capsys, "list", "--store", url)
    rows = [line.split() for line in out.splitlines()]
    assert rows[0][:3] == ["ID", "DEFINITION", "STATUS"]
    assert [row[0] for row in rows[1:]] == [
        "o",
        "o:Fulfilment.Payment:0",
        "o:Fulfilment.Warehouse:0",
    ]
    code, out, _ = run(capsys, "list", "--store", url, "--roots", "--status", "RUNNING")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["o"]
    code, out, _ = run(capsys, "list", "--store", url, "--status", "DONE", "--definition", "x")
    assert out.splitlines()[1:] == []

    code, out, _ = run(capsys, "list", "--store", url, "--limit", "1", "--cursor")
    lines = out.splitlines()
    assert lines[1].split()[0] == "o" and len(lines) == 3
    cursor = lines[-1].removeprefix("next cursor: ")
    code, out, _ = run(capsys, "list", "--store", url, "--limit", "1", "--cursor", cursor)
    assert out.splitlines()[1].split()[0] == "o:Fulfilment.Payment:0"
    code, out, _ = run(capsys, "list", "--store", url, "--limit", "1")
    assert len(out.splitlines()) == 4  # every page


def test_worker_once_fires_due_timers(
    capsys: pytest.CaptureFixture[str], defs: Path, url: str
) -> None:
    from harel import DurableRunner
    from harel.engine.dsl import definitions_from_dir
    from harel.registry import open_store

    store = open_store(url)
    DurableRunner(store, definitions_from_dir(defs), clock=lambda: 0.0).create(
        "order", execution_id="late"
    )
    code, out, err = run(capsys, "worker", "--store", url, "--definitions", str(defs), "--once")
    assert (code, err) == (0, "")
    assert "1 timer(s) fired" in out
    assert store.load("late").outcome == "expired"
    store.close()


@pytest.mark.parametrize("knobs", [["--concurrency", "4"], ["--lease", "5", "--batch", "1"]])
def test_worker_knobs_drain_the_same_work(
    capsys: pytest.CaptureFixture[str], defs: Path, url: str, knobs: list[str]
) -> None:
    from harel import DurableRunner
    from harel.engine.dsl import definitions_from_dir
    from harel.registry import open_store

    store = open_store(url)
    runner = DurableRunner(store, definitions_from_dir(defs), clock=lambda: 0.0)
    for name in ("late-1", "late-2", "late-3"):
        runner.create("order", execution_id=name)
    args = ["worker", "--store", url, "--definitions", str(defs), "--once", *knobs]
    code, out, err = run(capsys, *args)
    assert (code, err) == (0, "")
    assert "3 timer(s) fired" in out
    assert all(store.load(n).outcome == "expired" for n in ("late-1", "late-2", "late-3"))
    store.close()


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        (["--lease", "0"], "lease must be > 0"),
        (["--batch", "0"], "batch must be >= 1"),
        (["--concurrency", "0"], "--concurrency must be >= 1"),
    ],
)
def test_worker_refuses_bad_knobs(
    capsys: pytest.CaptureFixture[str], defs: Path, url: str, knobs: list[str], message: str
) -> None:
    args = ["worker", "--store", url, "--definitions", str(defs), "--once", *knobs]
    code, _, err = run(capsys, *args)
    assert code == 2 and message in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "missing.stm"], "no such file"),
        (["trace", "nope", "--store", "{url}"], "there is no sqlite store at sqlite:///"),
        (["send", "x", "Go", "--store", "{url}"], "pass --definitions DIR"),
        (["send", "x", "Go", "--store", "{url}", "--definitions", "{defs}"], "'x' is not stored"),
        (["send", "x", "Go", "--data", "[1]", "--store", "{url}"], "must be a JSON object"),
        (["list", "--store", "ghost://bob:hunter2@db/x"], "handles ghost:// URLs"),
        (["list", "--store", "{url}", "--limit", "0"], "--limit must be >= 1"),
        (["worker", "--store", "{url}", "--definitions", "{defs}/m.stm"], "not a directory"),
        (["run", "{defs}/order.stm", "--actions", "no_such_mod"], "cannot import actions"),
    ],
)
def test_errors_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], defs: Path, url: str, argv: list[str], message: str
) -> None:
    argv = [arg.format(url=url, defs=defs) for arg in argv]
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("harel: error: ") and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err and "hunter2" not in err


def test_bad_trace_max_names_the_variable(
    capsys: pytest.CaptureFixture[str], defs: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STM_TRACE_MAX", "lots")
    code, _, err = run(capsys, "worker", "--store", url, "--definitions", str(defs), "--once")
    assert code == 2 and "STM_TRACE_MAX" in err and "'lots'" in err


def test_definitions_dir_from_env(
    capsys: pytest.CaptureFixture[str], defs: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STM_DEFINITIONS_DIR", str(defs))
    monkeypatch.setenv("STM_STORE_URL", url)
    assert run(capsys, "run", str(defs / "m.stm"), "--id", "m1")[0] == 0  # store from env
    code, out, _ = run(capsys, "send", "m1", "Go")
    assert code == 0 and out.startswith("m1: DONE/success at Done, version 2")


def test_demo_output(tmp_path: Path) -> None:
    out = io.StringIO()
    assert run_demo(tmp_path, out) == "success"
    text = out.getvalue()
    assert "store closed; reopening a new store on the same file" in text
    assert "1 timer fired -> Delivered, DONE/success" in text
    assert "paid: 42.5" in text
    assert len(text.splitlines()) < 30


def test_send_enqueue_hands_the_event_to_the_workers(
    capsys: pytest.CaptureFixture[str], defs: Path, url: str
) -> None:
    code, _, _ = run(capsys, "run", str(defs / "m.stm"), "--store", url, "--id", "q")
    assert code == 0
    args = ("--store", url, "--definitions", str(defs))
    code, out, err = run(capsys, "send", "q", "Go", "--event-id", "g1", "--enqueue", *args)
    assert code == 0, err
    assert out.startswith("q: enqueued 'Go' (event g1, outbox entry ")
    assert "harel worker" in err
    code, out, _ = run(capsys, "list", "--store", url)
    assert out.splitlines()[1].split()[:3] == ["q", "m", "RUNNING"]  # not run here
    code, out, err = run(capsys, "worker", *args, "--once")
    assert (code, err) == (0, "")
    code, out, _ = run(capsys, "list", "--store", url)
    assert out.splitlines()[1].split()[:3] == ["q", "m", "DONE"]
    code, out, err = run(capsys, "send", "q", "Nope", "--enqueue", *args)
    assert code == 2 and "declares no event 'Nope'" in err
