"""store_from_env(): STM_STORE_BACKEND / STM_STORE_URL and the legacy variables a backend's
plugin declares (``StoreBackend.legacy_env`` / ``legacy_vars``); core knows none of them."""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from harel import registry
from harel.registry._firstparty import FIRST_PARTY, FirstParty
from harel.store import AsyncDictStore, Capabilities, DictStore
from harel.store.errors import (
    BackendNotInstalled,
    BackendUnavailable,
    InvalidStoreURL,
    PluginError,
    StoreConfigError,
    UnknownBackend,
)

CAPS = Capabilities(persistent=False, multi_process=False, ordered_listing=True, exact_pages=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    import os

    for var in list(os.environ):
        if var.startswith(("STM_", "HAREL_")):
            monkeypatch.delenv(var)
    registry.reset()
    yield
    registry.reset()


def settings(**env: str) -> registry.StoreSettings:
    return registry.store_settings_from_env(env)


@pytest.fixture
def legacy_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An importable module holding legacy_env functions, as a backend's plugin would."""
    name = f"harel_legacy_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from harel.store.errors import StoreConfigError

            def custom(env):
                host = env.get("STM_CUSTOM_HOST")
                if not host:
                    return None
                if " " in host:
                    raise StoreConfigError("STM_CUSTOM_HOST must not hold spaces")
                token = env.get("STM_CUSTOM_TOKEN")
                return f"custom://{host}/db" + (f"?token={token}" if token else "")

            def explode(env):
                raise RuntimeError("custom://u:hunter2@h/ is down")

            def wrong_scheme(env):
                return "memory://"

            def not_a_string(env):
                return 42
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def custom_backend(
    module: str, function: str = "custom", **fields: object
) -> registry.StoreBackend:
    values: dict[str, object] = {
        "name": "custom",
        "schemes": ("custom",),
        "store": "harel.store.memory.sync:DictStore",
        "async_store": "harel.store.memory.aio:AsyncDictStore",
        "capabilities": CAPS,
        "distribution": "custom-dist",
        "version": "1",
        "legacy_env": f"{module}:{function}",
        "legacy_vars": ("STM_CUSTOM_HOST", "STM_CUSTOM_TOKEN"),
    }
    values.update(fields)
    return registry.StoreBackend(**values)  # type: ignore[arg-type]


def test_nothing_configured_leads_with_store_url() -> None:
    with pytest.raises(StoreConfigError) as info:
        registry.store_from_env()
    text = str(info.value)
    assert text.startswith("no store is configured: set STM_STORE_URL")
    assert text.index("STM_STORE_URL") < text.index("STM_STORE_DB")  # legacy comes second


def test_sqlite_from_its_plugins_legacy_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqlite = registry.get_backend("sqlite")
    assert sqlite.legacy_vars == ("STM_STORE_DB",) and sqlite.legacy_env is not None
    path = tmp_path / "dir with space" / "app.db"
    path.parent.mkdir()
    monkeypatch.setenv("STM_STORE_DB", str(path))
    found = registry.store_settings_from_env()
    assert (found.backend, found.source) == ("sqlite", "STM_STORE_DB")
    assert found.url.startswith("sqlite:////")
    store = registry.store_from_env()
    try:
        assert type(store).__name__ == "SqliteStore"
    finally:
        store.close()
    assert path.exists()
    assert settings(STM_STORE_DB="rel.db").url == "sqlite:///rel.db"
    assert settings(STM_STORE_BACKEND="sqlite", STM_STORE_DB=":memory:").url == (
        "sqlite:///:memory:"
    )


def test_core_holds_no_backend_variables() -> None:
    import harel.registry._env as env_module

    source = Path(env_module.__file__).read_text()
    for variable in ("STM_STORE_DB", "STM_POSTGRES_DSN", "STM_REDIS_URL", "STM_MONGO_URL"):
        assert variable not in source
    assert not hasattr(registry, "libpq_dsn_to_url")


def test_url_alone_selects_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STM_STORE_URL", "memory://shared-env")
    assert registry.store_settings_from_env().backend == "memory"
    first, second = registry.store_from_env(), registry.store_from_env()
    assert isinstance(first, DictStore) and first.data is second.data  # type: ignore[attr-defined]


def test_backend_name_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STM_STORE_BACKEND", "Memory")
    assert isinstance(registry.store_from_env(), DictStore)


@pytest.mark.anyio
async def test_async_store_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STM_STORE_URL", "memory://")
    store = await registry.store_from_env(async_=True)
    assert isinstance(store, AsyncDictStore)


def test_unknown_backend_name_lists_known_ones() -> None:
    with pytest.raises(UnknownBackend, match="'cassandra'") as info:
        settings(STM_STORE_BACKEND="cassandra")
    text = str(info.value)
    assert "STM_STORE_BACKEND" in text and "memory" in text and "postgres" in text


def test_backend_and_url_must_agree() -> None:
    with pytest.raises(StoreConfigError, match="does not match") as info:
        settings(STM_STORE_BACKEND="sqlite", STM_STORE_URL="redis://:pw@host/0")
    assert "pw" not in str(info.value) and "sqlite://" in str(info.value)
    found = settings(STM_STORE_BACKEND="memory", STM_STORE_URL="memory://x")
    assert found.backend == "memory"


def test_malformed_url() -> None:
    with pytest.raises(InvalidStoreURL):
        settings(STM_STORE_URL="no-scheme-here")


def test_first_party_backend_not_installed_names_the_pip_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ghost = FirstParty("ghost", "harel-store-ghost", ("ghost",), "GhostStore", "AsyncGhostStore")
    monkeypatch.setitem(FIRST_PARTY, "ghost", ghost)
    with pytest.raises(BackendNotInstalled, match="pip install harel-store-ghost"):
        settings(STM_STORE_BACKEND="ghost")


def test_plugin_declared_legacy_variables(legacy_module: str) -> None:
    registry.register(custom_backend(legacy_module))
    found = settings(STM_STORE_BACKEND="custom", STM_CUSTOM_HOST="h1")
    assert (found.backend, found.url, found.source) == (
        "custom",
        "custom://h1/db",
        "STM_CUSTOM_HOST",
    )
    found = settings(STM_STORE_BACKEND="custom", STM_CUSTOM_HOST="h1", STM_CUSTOM_TOKEN="t0k")
    assert found.source == "STM_CUSTOM_HOST, STM_CUSTOM_TOKEN"
    assert "t0k" not in repr(found)  # the knob travels in the URL, redacted in the repr
    with pytest.raises(StoreConfigError) as info:
        settings(STM_STORE_BACKEND="custom")
    text = str(info.value)
    assert "set STM_STORE_URL" in text and "STM_CUSTOM_HOST / STM_CUSTOM_TOKEN" in text
    with pytest.raises(StoreConfigError, match="must not hold spaces"):
        settings(STM_STORE_BACKEND="custom", STM_CUSTOM_HOST="a b")
    # STM_STORE_URL wins over legacy variables
    assert settings(STM_STORE_URL="custom://x", STM_CUSTOM_HOST="h1").url == "custom://x"


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("explode", "legacy_env function failed"),
        ("wrong_scheme", "memory:// URL, which it does not handle"),
        ("not_a_string", "returned int"),
        ("missing", "cannot import its legacy_env function"),
    ],
)
def test_broken_legacy_functions_are_reported(
    legacy_module: str, function: str, message: str
) -> None:
    registry.register(custom_backend(legacy_module, function))
    with pytest.raises(BackendUnavailable, match=message) as info:
        settings(STM_STORE_BACKEND="custom", STM_CUSTOM_HOST="h")
    assert "hunter2" not in str(info.value)
    error = info.value
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"legacy_env": "not an import string"}, "legacy_env="),
        ({"legacy_vars": ["STM_X"]}, "legacy_vars="),
        ({"legacy_vars": ("lower",)}, "legacy_vars="),
        ({"legacy_env": None}, "legacy_vars needs legacy_env"),
    ],
)
def test_legacy_fields_are_validated(fields: dict[str, object], message: str) -> None:
    with pytest.raises(PluginError, match=message):
        registry.register(custom_backend("mod", **fields))


def test_third_party_backend_without_legacy_variables_needs_store_url() -> None:
    registry.register(custom_backend("mod", legacy_env=None, legacy_vars=()))
    with pytest.raises(StoreConfigError, match=r"set STM_STORE_URL to a custom://\.\.\. URL"):
        settings(STM_STORE_BACKEND="custom")
    assert settings(STM_STORE_BACKEND="custom", STM_STORE_URL="custom://x").backend == "custom"
