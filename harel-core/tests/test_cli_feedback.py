"""The CLI says what it is doing (issue 19): read-only commands create nothing, waits are
printed, one rule for undeclared events, tracing in every command, no tracebacks, URL and
option typos get a suggestion (never a secret)."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from harel.cli import main
from harel.registry import open_store
from harel.store.common.retry import Wait, connect_with_retry, report_waits, retry_limit
from harel.store.common.urls import option_suggestions, url_typo_hint
from harel.store.errors import StoreNotFound, StoreUnavailable

pytest.importorskip("harel_store_sqlite", reason="harel-store-sqlite not installed")

GO = "event Go {} machine m { initial A  state A {}  final Done success {}  from A to Done on Go }"
TWO = (
    "event Go {} event Stop {} machine two { initial A  state A {}  state B {}  "
    "final Done success {}  from A to B on Go  from B to Done on Stop }"
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("STM_STORE", "STM_TRACE", "STM_DEFINITIONS")):
            monkeypatch.delenv(name)


@pytest.fixture
def defs(tmp_path: Path) -> Path:
    directory = tmp_path / "defs"
    directory.mkdir()
    (directory / "m.stm").write_text(GO)
    (directory / "two.stm").write_text(TWO)
    return directory


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- read-only commands open an existing store only -----------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["list"],
        ["trace", "x"],
        ["dead-letters"],
        ["purge", "--id", "x"],
    ],
)
def test_read_only_commands_do_not_create_a_sqlite_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]
) -> None:
    path = tmp_path / "typo.db"
    code, out, err = run(capsys, *argv, "--store", f"sqlite:///{path}")
    assert code == 2 and out == ""
    assert err.startswith("harel: error: there is no sqlite store at sqlite:///")
    assert "nothing was created" in err and err.count("\n") == 1
    assert not path.exists()


def test_migrate_does_not_create_its_source(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source, destination = tmp_path / "typo.db", tmp_path / "dst.db"
    code, _, err = run(capsys, "migrate", f"sqlite:///{source}", f"sqlite:///{destination}")
    assert code == 2 and "there is no sqlite store" in err
    assert not source.exists() and not destination.exists()


def test_an_existing_store_is_listed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, defs: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    assert run(capsys, "run", str(defs / "m.stm"), "--store", url, "--id", "m1")[0] == 0
    code, out, _ = run(capsys, "list", "--store", url)
    assert code == 0 and out.splitlines()[1].split()[0] == "m1"


def test_a_missing_named_memory_dataset_is_not_created() -> None:
    from harel.store.memory import _spec

    name = f"nope{uuid.uuid4().hex[:8]}"
    with pytest.raises(StoreNotFound, match="there is no memory store"):
        open_store(f"memory://{name}", create=False)
    assert name not in _spec._NAMED
    open_store(f"memory://{name}").close()  # a writer creates it
    open_store(f"memory://{name}", create=False).close()


POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture
def postgres() -> Iterator[object]:
    psycopg = pytest.importorskip("psycopg")
    pytest.importorskip("harel_store_postgres")
    try:
        conn = psycopg.connect(POSTGRES, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError:
        pytest.skip("no PostgreSQL at 127.0.0.1:5432")
    yield conn
    conn.close()


def test_list_does_not_create_a_postgres_schema(
    capsys: pytest.CaptureFixture[str], postgres: object
) -> None:
    schema = f"harel_typo_{uuid.uuid4().hex[:8]}"
    code, _, err = run(capsys, "list", "--store", f"{POSTGRES}?schema={schema}")
    assert code == 2 and "there is no postgres store" in err
    row = postgres.execute(  # type: ignore[attr-defined]
        "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (schema,)
    ).fetchone()
    assert row is None


def test_list_opens_an_existing_postgres_schema(
    capsys: pytest.CaptureFixture[str], postgres: object
) -> None:
    schema = f"harel_list_{uuid.uuid4().hex[:8]}"
    url = f"{POSTGRES}?schema={schema}"
    try:
        open_store(url).close()
        code, out, err = run(capsys, "list", "--store", url)
        assert (code, err) == (0, "") and out.startswith("ID")
    finally:
        postgres.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[attr-defined]


# -- waits are said, interactive commands give up sooner ------------------------------------


def _refused() -> None:
    raise StoreUnavailable("connection refused by postgresql://bob:hunter2@db:5439/app")


def test_each_retry_is_reported_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    waits: list[Wait] = []
    with (
        caplog.at_level(logging.WARNING, logger="harel.store.retry"),
        report_waits(waits.append),
        pytest.raises(StoreUnavailable, match="after 3 attempt"),
    ):
        connect_with_retry(
            _refused,
            retries=2,
            delay=0.0,
            retry_on=(StoreUnavailable,),
            what="postgresql://bob:hunter2@db:5439/app",
        )
    lines = [wait.describe() for wait in waits]
    assert lines[0].startswith("waiting for postgresql://bob:***@db:5439/app — attempt 2 of 3")
    assert lines[1].startswith("waiting for postgresql://bob:***@db:5439/app — attempt 3 of 3")
    assert [record.levelno for record in caplog.records] == [logging.WARNING] * 2
    assert "hunter2" not in " ".join(lines) + caplog.text


def test_retry_limit_caps_the_retries() -> None:
    calls: list[int] = []

    def connect() -> None:
        calls.append(1)
        _refused()

    with retry_limit(1), pytest.raises(StoreUnavailable, match="after 2 attempt"):
        connect_with_retry(connect, retries=8, delay=0.0, retry_on=(StoreUnavailable,), what="x")
    assert len(calls) == 2


REDIS_DOWN = "redis://:hunter2@127.0.0.1:1/0?retry_delay=0"


def test_an_unreachable_server_is_waited_for_aloud(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("harel_store_redis")
    code, _, err = run(capsys, "list", "--store", REDIS_DOWN)
    lines = err.splitlines()
    assert code == 2 and "hunter2" not in err
    waits = [line for line in lines if line.startswith("harel: waiting for Redis redis://")]
    assert [line.split(" — ")[1].split(" in ")[0] for line in waits] == [
        "attempt 2 of 3",
        "attempt 3 of 3",
    ]
    assert lines[-1].startswith("harel: error: ") and "after 3 attempt(s)" in lines[-1]


def test_a_url_setting_connect_retries_is_honoured(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("harel_store_redis")
    code, _, err = run(capsys, "list", "--store", REDIS_DOWN + "&connect_retries=4")
    assert code == 2 and "after 5 attempt(s)" in err and "attempt 5 of 5" in err


# -- one rule for undeclared events; tracing in every command --------------------------------


def test_run_refuses_an_undeclared_event(capsys: pytest.CaptureFixture[str], defs: Path) -> None:
    code, out, err = run(capsys, "run", str(defs / "m.stm"), "-e", "Nope")
    assert code == 2 and out == ""
    assert err == (
        "harel: error: machine 'm' declares no event 'Nope' (it knows: Go); nothing was run\n"
    )


def test_send_and_worker_trace_like_run(
    capsys: pytest.CaptureFixture[str], defs: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    store = ("--store", url)
    assert run(capsys, "run", str(defs / "two.stm"), *store, "--id", "t", "-e", "Go")[0] == 0
    assert run(capsys, "send", "t", "Stop", *store, "--definitions", str(defs))[0] == 0
    code, out, _ = run(capsys, "trace", "t", *store)
    assert code == 0 and "timeline incomplete" not in out
    assert [line.split()[1] for line in out.splitlines()[1:]] == ["Start", "Go", "Stop"]


def test_an_untraced_tail_is_marked(
    capsys: pytest.CaptureFixture[str], defs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    store = ("--store", url)
    assert run(capsys, "run", str(defs / "two.stm"), *store, "--id", "t")[0] == 0
    monkeypatch.setenv("STM_TRACE", "0")
    assert run(capsys, "send", "t", "Go", *store, "--definitions", str(defs))[0] == 0
    code, out, _ = run(capsys, "trace", "t", *store)
    assert code == 0 and "RUNNING at B" in out
    assert "(timeline incomplete: it ends at A, the execution is at B;" in out


# -- no tracebacks, clear messages ---------------------------------------------------------


class _ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_pipe_ends_quietly(
    capsys: pytest.CaptureFixture[str], defs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    code = main(["run", str(defs / "m.stm"), "-e", "Go"])
    assert code == 141
    assert capsys.readouterr().err == ""


def test_ctrl_c_during_start_up_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import harel.cli

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(harel.cli, "build_parser", interrupted)
    assert main(["list"]) == 130
    assert capsys.readouterr().err == "harel: interrupted\n"


def test_the_demo_without_sqlite_says_what_to_install() -> None:
    env = {**os.environ, "HAREL_DISABLE_PLUGINS": "harel-store-sqlite"}
    done = subprocess.run(
        [sys.executable, "-m", "harel.demo"], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("harel demo: the demo runs on the SQLite store: ")
    assert done.stderr.count("\n") == 1


def test_unbound_actions_point_at_the_option(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    machine = tmp_path / "act.stm"
    machine.write_text("machine a { initial A  state A { on enter ping } }")
    code, _, err = run(capsys, "run", str(machine))
    assert code == 2 and "bind them with --actions MODULE" in err and "actions=" not in err


def test_run_on_a_directory_says_so(capsys: pytest.CaptureFixture[str], defs: Path) -> None:
    code, _, err = run(capsys, "run", str(defs))
    assert code == 2 and "is a directory: harel run takes one .stm file" in err


def test_purge_notices_use_the_harel_prefix(
    capsys: pytest.CaptureFixture[str], defs: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    assert run(capsys, "run", str(defs / "m.stm"), "--store", url, "--id", "busy")[0] == 0
    code, _, err = run(capsys, "purge", "--store", url, "--id", "busy", "--id", "ghost")
    assert code == 1
    assert err.splitlines() == [
        "harel: refused: busy is RUNNING, not finished; --force purges it anyway",
        "harel: not purged: ghost is not stored",
    ]


# -- URL and option typos -------------------------------------------------------------------


@pytest.mark.parametrize("typed", ["sqlite:/x.db", "sqlite//x.db", "sqlite:x.db", "sqlit:/x.db"])
def test_a_file_url_typo_gets_the_likely_url(
    capsys: pytest.CaptureFixture[str], typed: str
) -> None:
    code, _, err = run(capsys, "list", "--store", typed)
    assert code == 2 and "did you mean sqlite:///x.db?" in err and "<hidden" not in err


@pytest.mark.parametrize(
    "typed",
    ["postgresql:/bob:hunter2@db/app", "postgres//db/app?password=hunter2", "redis:/:hunter2@h"],
)
def test_a_typo_with_a_possible_secret_hides_the_rest(
    capsys: pytest.CaptureFixture[str], typed: str
) -> None:
    code, _, err = run(capsys, "list", "--store", typed)
    assert code == 2 and "hunter2" not in err and "bob" not in err
    assert "the rest is not shown" in err and "://..." in err


@pytest.mark.parametrize("typed", ["hunter2", "pa:ssword", "xyzzy:/secret-token"])
def test_input_that_is_no_scheme_stays_hidden(typed: str) -> None:
    assert url_typo_hint(typed, {"sqlite", "postgresql"}) is None


def test_an_unknown_scheme_close_to_a_known_one_is_suggested(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, "list", "--store", "sqlit:///x.db")
    assert code == 2 and "(did you mean sqlite://?)" in err


def test_a_misspelt_option_is_suggested(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("harel_store_postgres")
    code, _, err = run(capsys, "list", "--store", f"{POSTGRES}?sslmod=disable")
    assert code == 2 and "unknown option(s) sslmod" in err and "(did you mean sslmode?)" in err
    assert option_suggestions(["nothing_like_it"], ["sslmode"]) == ""
