"""The ``harel`` CLI framework, ``harel stores`` and ``harel conformance`` (via main([...]))."""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from harel import registry
from harel.cli import COMMAND_MODULES, main, scrub
from harel.registry._core import DISABLE_VAR, LOAD_VAR, PREFER_VAR, STRICT_VAR
from harel.registry._firstparty import FIRST_PARTY, FirstParty
from harel.store.memory import CAPABILITIES


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in (DISABLE_VAR, STRICT_VAR, PREFER_VAR):
        monkeypatch.delenv(var, raising=False)
    # only the two backends these tests know, whatever else is installed
    monkeypatch.setenv(LOAD_VAR, "memory,sqlite")
    ghost = FirstParty("ghost", "harel-store-ghost", ("ghost",), "GhostStore", "AsyncGhostStore")
    monkeypatch.setitem(FIRST_PARTY, "ghost", ghost)
    registry.reset()
    yield
    registry.reset()


def _register(
    name: str, store: str = "harel.store.memory:DictStore", harness: str | None = None
) -> list[registry.StoreBackend]:
    return registry.register(
        registry.StoreBackend(
            name=name,
            schemes=(name,),
            store=store,
            async_store="harel.store.memory:AsyncDictStore",
            capabilities=CAPABILITIES,
            distribution=f"{name}-dist",
            version="2.0",
            harness=harness,
        )
    )


def test_command_modules_are_listed() -> None:
    assert COMMAND_MODULES[:2] == ["harel.cli.stores", "harel.cli.conformance_cmd"]


def test_stores_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stores"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "NAME",
        "DISTRIBUTION",
        "VERSION",
        "SCHEMES",
        "CAPABILITIES",
        "STATUS",
    ]
    memory = next(line.split() for line in lines if line.startswith("memory "))
    assert memory == [
        "memory",
        "harel-core",
        "0.1.0",
        "memory",
        "ordered_listing,exact_pages",
        "ok",
    ]
    sqlite = next(line.split() for line in lines if line.startswith("sqlite "))
    assert sqlite[1] == "harel-store-sqlite" and sqlite[-1] == "ok"
    assert not any(line.startswith("ghost") for line in lines)


def test_stores_all_lists_missing_first_party(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stores", "--all"]) == 0
    out = capsys.readouterr().out
    ghost = next(line.split() for line in out.splitlines() if line.startswith("ghost "))
    assert ghost[:4] == ["ghost", "harel-store-ghost", "-", "ghost"]
    assert "not installed" in " ".join(ghost)
    assert "ghost (harel-store-ghost): pip install harel-store-ghost" in out


def test_stores_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stores", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    by_name = {item["name"]: item for item in payload}
    assert by_name["memory"]["capabilities"] == CAPABILITIES.as_dict()
    assert by_name["memory"]["store"] == "harel.store.memory.sync:DictStore"
    assert by_name["sqlite"]["status"] == "ok"
    assert "check" not in by_name["sqlite"]
    assert main(["stores", "--json", "--all"]) == 0
    statuses = {item["name"]: item["status"] for item in json.loads(capsys.readouterr().out)}
    assert statuses["ghost"] == "not installed"


def test_stores_check_ok(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stores", "--check"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-1] == "CHECK"
    assert next(line for line in lines if line.startswith("memory ")).split()[-2:] == ["ok", "ok"]


def test_stores_check_reports_import_failures(capsys: pytest.CaptureFixture[str]) -> None:
    _register("spectre", store="no_such_module_anywhere.sync:SpectreStore")
    assert main(["stores"]) == 0  # listing never imports
    capsys.readouterr()
    assert main(["stores", "--check"]) == 1
    out = capsys.readouterr().out
    assert next(line for line in out.splitlines() if line.startswith("spectre ")).split()[-1] == (
        "failed"
    )
    assert "spectre: check failed:" in out and "no_such_module_anywhere" in out
    assert main(["stores", "--check", "--json"]) == 1
    spectre = next(i for i in json.loads(capsys.readouterr().out) if i["name"] == "spectre")
    assert spectre["check"] == "failed" and "no_such_module_anywhere" in spectre["check_errors"][0]


def test_stores_check_reports_capability_mismatch(capsys: pytest.CaptureFixture[str]) -> None:
    registry.register(
        registry.StoreBackend(
            name="liar",
            schemes=("liar",),
            store="harel.store.memory:DictStore",
            async_store="harel.store.memory:AsyncDictStore",
            capabilities=type(CAPABILITIES)(
                persistent=True, multi_process=True, ordered_listing=True, exact_pages=True
            ),
            distribution="liar",
            version="1",
        )
    )
    assert main(["stores", "--check"]) == 1
    assert "differs from the registered capabilities" in capsys.readouterr().out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "choose a command" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2
    assert main(["stores", "--bogus"]) == 2
    assert main(["--help"]) == 0
    assert "stores" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"harel-core {registry.core_version()}"


def test_conformance_unknown_scheme_is_one_line_without_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["conformance", "ghost://app:hunter2@db/harel"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert "\n" not in err and err.startswith("harel: error:")
    assert "pip install harel-store-ghost" in err
    assert "hunter2" not in err and "Traceback" not in err


def test_conformance_without_harness(capsys: pytest.CaptureFixture[str]) -> None:
    _register("plain")
    assert main(["conformance", "plain://x"]) == 2
    assert "ships no conformance harness" in capsys.readouterr().err


def test_conformance_without_arguments_prints_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: harel conformance")
    assert "a store URL is required, e.g. `harel conformance sqlite:///kit.db`" in err
    assert "PYTEST_ARGS" not in err.split("\n", 1)[1]  # no "PYTEST_ARGS is required"


def test_conformance_runs_the_kit_with_pytest_arguments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["conformance", "memory://", "--", "--collect-only", "-q"]) == 0
    out = capsys.readouterr().out
    assert "::TestStoreConformance::test_" in out


def test_conformance_harness_failure_is_one_redacted_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["conformance", "memory://user:pa55@host/x?token=t0k3n"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harel: error: the conformance kit cannot use memory://user:***@host")
    assert err.count("\n") == 1 and "pa55" not in err and "t0k3n" not in err


def test_plugin_warnings_print_without_a_source_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = f"broken_plugin_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text("raise ImportError('no driver here')\n")
    info = tmp_path / "harel_store_broken-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: harel-store-broken\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(f"[harel.stores]\nbroken = {module}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(LOAD_VAR, "memory,sqlite,broken")
    registry.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        registry.open_store("memory://warned").close()  # list opens existing stores only
    registry.reset()
    assert main(["list", "--store", "memory://warned"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("harel: warning: store plugin 'broken = ")
    assert "ImportError: no driver here" in err and err.count("\n") == 1
    assert "warnings.warn" not in err and ".py:" not in err

    monkeypatch.setenv(STRICT_VAR, "1")
    registry.reset()
    assert main(["stores", "--json"]) == 1  # strict: still the JSON listing, then the error
    captured = capsys.readouterr()
    rows = {row["name"]: row for row in json.loads(captured.out)}
    assert rows["broken"]["status"] == "broken" and rows["memory"]["status"] == "ok"
    assert captured.err.startswith("harel: error: store plugin 'broken = ")
    assert "strict mode" in captured.err
    assert main(["stores"]) == 1
    assert "broken" in capsys.readouterr().out


def test_errors_show_no_exception_type_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_dir = tmp_path / "file.stm"
    not_a_dir.write_text("")
    argv = ["worker", "--store", "memory://", "--definitions", str(not_a_dir), "--once"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "is not a directory" in err and "NotADirectoryError" not in err
    argv = ["send", "x", "Go", "--data", "{nope", "--store", "memory://"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "not valid JSON" in err and "JSONDecodeError" not in err
    missing = tmp_path / "missing-dir" / "defs"
    assert main(["worker", "--store", "memory://", "--definitions", str(missing)]) == 2
    assert "Error" not in capsys.readouterr().err


def test_scrub() -> None:
    text = "failed: redis://u:pw@h:6379/0 and postgresql://a:b@c/d, sqlite:///x.db"
    assert scrub(text) == (
        "failed: redis://u:***@h:6379/0 and postgresql://a:***@c/d, sqlite:///x.db"
    )
    assert scrub("dsn: host=db password='s3 cr' user=x") == "dsn: host=db password=*** user=x"
