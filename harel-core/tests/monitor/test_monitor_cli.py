"""``harel monitor``: the extra's absence, the bind rule, the redacted banner, the options."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from harel.cli import main
from harel.monitor import INSTALL_HINT
from harel.monitor.settings import MonitorSettings

SECRET = "pw-Hidden-77"


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Calls of ``serve`` (replaced: nothing listens), with their arguments."""
    calls: list[dict[str, Any]] = []

    def fake_serve(store: Any, settings: MonitorSettings, *, host: str, port: int) -> None:
        calls.append({"store": store, "settings": settings, "host": host, "port": port})

    monkeypatch.setattr("harel.monitor.server.serve", fake_serve)
    monkeypatch.delenv("HAREL_MONITOR_TOKEN", raising=False)
    return calls


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """An existing (empty) SQLite store: the monitor opens existing stores only."""
    from harel.registry import open_store

    url = f"sqlite:///{tmp_path}/monitor.db"
    open_store(url).close()
    return url


def test_without_the_extra_it_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], served: list[Any]
) -> None:
    monkeypatch.setitem(sys.modules, "starlette", None)
    assert main(["monitor", "--store", "memory://"]) == 2
    assert INSTALL_HINT in capsys.readouterr().err
    assert served == []


def test_non_loopback_without_a_token_refuses_to_start(
    capsys: pytest.CaptureFixture[str], served: list[Any]
) -> None:
    assert main(["monitor", "--store", "memory://", "--host", "0.0.0.0"]) == 2
    assert "--token" in capsys.readouterr().err
    assert served == []


def test_token_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, served: list[dict[str, Any]], sqlite_url: str
) -> None:
    monkeypatch.setenv("HAREL_MONITOR_TOKEN", "env-token")
    assert main(["monitor", "--store", sqlite_url, "--host", "0.0.0.0", "--port", "9000"]) == 0
    (call,) = served
    assert call["settings"].token == "env-token"
    assert (call["host"], call["port"]) == ("0.0.0.0", 9000)


def test_banner_shows_the_url_redacted(
    open_backend: Any, capsys: pytest.CaptureFixture[str], served: list[dict[str, Any]]
) -> None:
    _, base = open_backend("postgres")
    assert base is not None
    secret_url = base.replace("postgres@", f"postgres:{SECRET}@", 1)
    assert SECRET in secret_url
    assert main(["monitor", "--store", secret_url]) == 0
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err
    assert "127.0.0.1:8765" in out.out and "read-only" in out.out
    (call,) = served
    assert SECRET not in call["settings"].store_label
    assert call["settings"].allow_writes is False
    assert call["settings"].definitions == {}


def test_definitions_and_writes(
    tmp_path: Path,
    served: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    sqlite_url: str,
) -> None:
    from harel.examples import ORDER_STM

    (tmp_path / "order.stm").write_text(Path(ORDER_STM).read_text(encoding="utf-8"))
    argv = ["monitor", "--store", sqlite_url, "--definitions", str(tmp_path), "--allow-writes"]
    assert main(argv) == 0
    (call,) = served
    assert set(call["settings"].definitions) == {"order"}
    assert call["settings"].allow_writes is True
    assert "writes allowed" in capsys.readouterr().out
    assert main(["monitor", "--store", sqlite_url, "--port", "70000"]) == 2
