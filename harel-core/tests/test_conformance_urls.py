"""Where tests point a backend: an explicit variable, else the backend's declared local URL."""

from __future__ import annotations

from pathlib import Path

import pytest
from harel.conformance import backend_test_url, backend_test_url_or_skip, url_variable_for
from harel.conformance.urls import in_ci


def test_variable_names() -> None:
    assert url_variable_for("postgres") == "HAREL_TEST_POSTGRES_URL"
    assert url_variable_for("my-store.v2") == "HAREL_TEST_MY_STORE_V2_URL"


def test_local_url_is_filled_with_an_existing_workdir(tmp_path: Path) -> None:
    workdir = tmp_path / "deep" / "dir"
    url = backend_test_url("sqlite", workdir, environ={})
    assert url == f"sqlite:///{workdir.resolve()}/harel.db"
    assert workdir.is_dir()
    assert backend_test_url("memory", tmp_path, environ={}) == "memory://"


def test_explicit_variable_wins(tmp_path: Path) -> None:
    env = {"HAREL_TEST_SQLITE_URL": "sqlite:////elsewhere/x.db"}
    assert backend_test_url("sqlite", tmp_path, environ=env) == "sqlite:////elsewhere/x.db"


def test_ci_detection() -> None:
    assert in_ci({"CI": "true"}) and in_ci({"CI": "1"})
    assert not in_ci({}) and not in_ci({"CI": "false"})


def test_backend_without_local_url_skips_outside_ci_and_fails_in_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harel import registry
    from harel.registry import StoreBackend
    from harel.store.contract import Capabilities

    caps = Capabilities(persistent=True, multi_process=True, ordered_listing=True, exact_pages=True)
    registry.register(
        StoreBackend(
            name="serveronly",
            schemes=("serveronly",),
            store="nowhere.mod:Store",
            async_store="nowhere.mod:AsyncStore",
            capabilities=caps,
            distribution="serveronly-dist",
            version="1",
        )
    )
    try:
        monkeypatch.delenv("HAREL_TEST_SERVERONLY_URL", raising=False)
        assert backend_test_url("serveronly", tmp_path) is None
        monkeypatch.setenv("CI", "false")
        with pytest.raises(pytest.skip.Exception, match="HAREL_TEST_SERVERONLY_URL"):
            backend_test_url_or_skip("serveronly", tmp_path)
        monkeypatch.setenv("CI", "true")
        with pytest.raises(pytest.fail.Exception, match="CI=true"):
            backend_test_url_or_skip("serveronly", tmp_path)
    finally:
        registry.unregister("serveronly")
