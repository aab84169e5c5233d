"""The ``harel`` CLI framework, ``harel stores`` and ``harel conformance`` (via main([...]))."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import harel.conformance
import pytest
from harel import registry
from harel.cli import COMMAND_MODULES, main, scrub
from harel.store.memory import CAPABILITIES


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in (registry.LOAD_VAR, registry.DISABLE_VAR, registry.STRICT_VAR):
        monkeypatch.delenv(var, raising=False)
    registry.reset()
    yield
    registry.reset()


def _register(name: str, store: str = "harel.store.memory:DictStore", harness: str | None = None):
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
    assert not any(line.startswith("postgres") for line in lines)


def test_stores_all_lists_missing_first_party(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stores", "--all"]) == 0
    out = capsys.readouterr().out
    postgres = next(line.split() for line in out.splitlines() if line.startswith("postgres "))
    assert postgres[:4] == ["postgres", "harel-store-postgres", "-", "postgres,postgresql"]
    assert "not installed" in " ".join(postgres)
    assert "postgres (harel-store-postgres): pip install harel-store-postgres" in out


def test_stores_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stores", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    by_name = {item["name"]: item for item in payload}
    assert by_name["memory"]["capabilities"] == CAPABILITIES.as_dict()
    assert by_name["memory"]["store"] == "harel.store.memory:DictStore"
    assert by_name["sqlite"]["status"] == "ok"
    assert "check" not in by_name["sqlite"]
    assert main(["stores", "--json", "--all"]) == 0
    statuses = {item["name"]: item["status"] for item in json.loads(capsys.readouterr().out)}
    assert statuses["redis"] == "not installed"


def test_stores_check_ok(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stores", "--check"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-1] == "CHECK"
    assert next(line for line in lines if line.startswith("memory ")).split()[-2:] == ["ok", "ok"]


def test_stores_check_reports_import_failures(capsys: pytest.CaptureFixture[str]) -> None:
    _register("ghost", store="no_such_module_anywhere.sync:GhostStore")
    assert main(["stores"]) == 0  # listing never imports
    capsys.readouterr()
    assert main(["stores", "--check"]) == 1
    out = capsys.readouterr().out
    assert next(line for line in out.splitlines() if line.startswith("ghost ")).split()[-1] == (
        "failed"
    )
    assert "ghost: check failed:" in out and "no_such_module_anywhere" in out
    assert main(["stores", "--check", "--json"]) == 1
    ghost = next(i for i in json.loads(capsys.readouterr().out) if i["name"] == "ghost")
    assert ghost["check"] == "failed" and "no_such_module_anywhere" in ghost["check_errors"][0]


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
    assert main(["conformance", "postgresql://app:hunter2@db/harel"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert "\n" not in err and err.startswith("harel: error:")
    assert "pip install harel-store-postgres" in err
    assert "hunter2" not in err and "Traceback" not in err


def test_conformance_without_harness(capsys: pytest.CaptureFixture[str]) -> None:
    _register("plain")
    assert main(["conformance", "plain://x"]) == 2
    assert "ships no conformance harness" in capsys.readouterr().err


def test_conformance_delegates_to_the_kit(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, list[str]]] = []

    def fake_run(url: str, pytest_args: Sequence[str] = ()) -> int:
        calls.append((url, list(pytest_args)))
        return 5

    monkeypatch.setattr(harel.conformance, "run_conformance", fake_run, raising=False)
    assert main(["conformance", "memory://", "-x", "-k", "commit"]) == 5
    assert main(["conformance", "memory://", "--", "-q"]) == 5
    assert calls == [("memory://", ["-x", "-k", "commit"]), ("memory://", ["-q"])]


def test_unexpected_errors_are_scrubbed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def explode(url: str, pytest_args: Sequence[str] = ()) -> Any:
        raise OSError(f"cannot reach {url}\nsecond line")

    monkeypatch.setattr(harel.conformance, "run_conformance", explode, raising=False)
    assert main(["conformance", "memory://user:pa55@host/x"]) == 2
    err = capsys.readouterr().err
    assert err == "harel: error: OSError: cannot reach memory://user:***@host/x second line\n"


def test_scrub() -> None:
    text = "failed: redis://u:pw@h:6379/0 and postgresql://a:b@c/d, sqlite:///x.db"
    assert scrub(text) == (
        "failed: redis://u:***@h:6379/0 and postgresql://a:***@c/d, sqlite:///x.db"
    )
