"""The CLI says what happened (issue 7 §7): ``--machine`` advice, DSL carets kept, CLI-phrased
advice, "nothing happened" notices, a usable message when no store is configured, and a
worker that stops cleanly on a SIGTERM during its start-up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harel.cli import main

pytest.importorskip("harel_store_sqlite", reason="harel-store-sqlite not installed")

TWO = """
event Go {}
machine first { initial A  state A {}  final Done success {}  from A to Done on Go }
machine second { initial B  state B {} }
"""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("STM_"):
            monkeypatch.delenv(name)


@pytest.fixture
def defs(tmp_path: Path) -> Path:
    directory = tmp_path / "defs"
    directory.mkdir()
    (directory / "two.stm").write_text(TWO)
    return directory


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_with_several_machines_names_the_option(
    capsys: pytest.CaptureFixture[str], defs: Path
) -> None:
    code, _, err = run(capsys, "run", str(defs / "two.stm"))
    assert code == 2 and "several machines (first, second)" in err
    assert "--machine NAME" in err and "name=" not in err
    code, _, err = run(capsys, "run", str(defs / "two.stm"), "--machine", "third")
    assert code == 2 and "--machine takes one of: first, second" in err
    code, out, _ = run(capsys, "run", str(defs / "two.stm"), "--machine", "first", "-e", "Go")
    assert code == 0 and "DONE/success" in out


def test_dsl_errors_keep_their_caret(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.stm"
    bad.write_text("machine m {\n  initial A\n  state A { on enter }\n}\n")
    code, _, err = run(capsys, "run", str(bad))
    assert code == 2
    lines = err.rstrip("\n").split("\n")
    assert lines[0].startswith(f"harel: error: {bad}:3:")
    assert lines[1] == "      state A { on enter }"
    assert lines[2].strip() == "^" and len(lines) == 3


def test_send_advice_is_phrased_for_the_cli(
    capsys: pytest.CaptureFixture[str], defs: Path, url: str, tmp_path: Path
) -> None:
    assert run(capsys, "run", str(defs / "two.stm"), "--machine", "second", "--store", url,
               "--id", "x")[0] == 0  # fmt: skip
    other = tmp_path / "other"
    other.mkdir()
    (other / "go.stm").write_text(TWO.replace("first", "third").replace("second", "fourth"))
    code, _, err = run(capsys, "send", "x", "Go", "--store", url, "--definitions", str(other))
    assert code == 2
    assert "runs machine 'second', which is not among the machines in" in err
    assert "add its .stm file there" in err and "runner's definitions mapping" not in err


def test_send_says_when_nothing_happened(
    capsys: pytest.CaptureFixture[str], defs: Path, url: str
) -> None:
    args = ("--store", url, "--definitions", str(defs))
    assert run(capsys, "run", str(defs / "two.stm"), "--machine", "first", "--store", url,
               "--id", "e")[0] == 0  # fmt: skip
    # an event kind the machine does not declare: refused, nothing sent
    code, out, err = run(capsys, "send", "e", "Nope", *args)
    assert (code, out) == (2, "")
    assert "declares no event 'Nope' (it knows: Go); nothing was sent" in err
    # the first Go finishes it; a retry with the same id is a safe no-op, said so
    code, out, err = run(capsys, "send", "e", "Go", "--event-id", "g1", *args)
    assert (code, err) == (0, "") and out.startswith("e: DONE/success")
    # the execution is finished: nothing is sent, exit 1
    code, out, err = run(capsys, "send", "e", "Go", "--event-id", "g2", *args)
    assert code == 1 and out.startswith("e: DONE/success")
    assert err.startswith("harel: nothing happened: execution 'e' is DONE")


def test_reused_event_id_says_nothing_happened(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, url: str
) -> None:
    directory = tmp_path / "loop"
    directory.mkdir()
    (directory / "loop.stm").write_text(  # Pong is used without an `event Pong {}` line
        "event Ping {} machine loop { initial A  state A {}  state B {} "
        "from A to B on Ping  from B to A on Pong }"
    )
    args = ("--store", url, "--definitions", str(directory))
    assert run(capsys, "run", str(directory / "loop.stm"), "--store", url, "--id", "l")[0] == 0
    code, out, err = run(capsys, "send", "l", "Ping", "--event-id", "same", *args)
    assert (code, err) == (0, "") and "at B, version 2" in out
    code, out, err = run(capsys, "send", "l", "Pong", "--event-id", "same", *args)
    assert code == 0 and "at B, version 2" in out  # nothing changed...
    assert err.startswith("harel: nothing happened: event id 'same' was already processed")
    assert "new --event-id" in err  # ...and the user is told why


def test_list_without_a_store_asks_for_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "list")
    assert code == 2
    assert err.startswith("harel: error: no store is configured: pass --store URL or set")
    assert "STM_STORE_DB" not in err


def test_worker_stops_cleanly_on_sigterm_during_start_up(tmp_path: Path, defs: Path) -> None:
    marker = tmp_path / "importing"
    (tmp_path / "slow_actions.py").write_text(
        f"import pathlib, time\npathlib.Path({str(marker)!r}).write_text('x')\ntime.sleep(3)\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    }
    command = [
        *(sys.executable, "-m", "harel.cli", "worker", "--store", f"sqlite:///{tmp_path / 'w.db'}"),
        *("--definitions", str(defs), "--actions", "slow_actions", "--poll", "0.05"),
    ]
    worker = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < deadline and worker.poll() is None, worker.communicate()
            time.sleep(0.01)
        worker.send_signal(signal.SIGTERM)  # while it is still loading its definitions
        out, err = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, err
    assert "stopped after 0 round(s)" in out and "Traceback" not in err
