"""store_from_env(): STM_STORE_BACKEND / STM_STORE_URL and the legacy per-backend variables."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harel import registry
from harel.store import AsyncDictStore, DictStore
from harel.store.errors import InvalidStoreURL, StoreConfigError, UnknownBackend, UnknownScheme
from harel.store.memory import CAPABILITIES


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


def test_default_backend_is_sqlite_and_needs_its_file() -> None:
    with pytest.raises(StoreConfigError, match="STM_STORE_DB is not set") as info:
        registry.store_from_env()
    assert "STM_STORE_URL" in str(info.value)


def test_sqlite_from_legacy_file_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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
    assert settings(STM_STORE_DB=":memory:").url == "sqlite:///:memory:"


def test_url_alone_selects_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STM_STORE_URL", "memory://shared-env")
    assert registry.store_settings_from_env().backend == "memory"
    first, second = registry.store_from_env(), registry.store_from_env()
    assert isinstance(first, DictStore) and first.data is second.data


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
    found = settings(STM_STORE_BACKEND="postgres", STM_STORE_URL="postgres://h/db")
    assert found.backend == "postgres"


def test_malformed_url() -> None:
    with pytest.raises(InvalidStoreURL):
        settings(STM_STORE_URL="no-scheme-here")


def test_postgres_dsn_becomes_url_and_missing_backend_names_pip_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = settings(
        STM_STORE_BACKEND="postgres",
        STM_POSTGRES_DSN="host=db port=5433 user=app password='s3 cr\\'et' dbname=harel "
        "sslmode=require",
    )
    assert found.url == "postgresql://app:s3%20cr%27et@db:5433/harel?sslmode=require"
    assert "s3" not in repr(found)
    monkeypatch.setenv("STM_STORE_BACKEND", "postgres")
    monkeypatch.setenv("STM_POSTGRES_DSN", "postgresql://app:topsecret@db/harel")
    with pytest.raises(UnknownScheme, match="pip install harel-store-postgres") as info:
        registry.store_from_env()
    assert "topsecret" not in str(info.value)
    with pytest.raises(StoreConfigError, match="STM_POSTGRES_DSN"):
        settings(STM_STORE_BACKEND="postgres")
    with pytest.raises(StoreConfigError, match="STM_POSTGRES_DSN"):
        settings(STM_STORE_BACKEND="postgres", STM_POSTGRES_DSN="host")


@pytest.mark.parametrize(
    ("env", "url", "knobs", "source"),
    [
        (
            {"STM_STORE_BACKEND": "redis", "STM_REDIS_URL": "redis://r:6379/1"},
            "redis://r:6379/1",
            {},
            "STM_REDIS_URL",
        ),
        (
            {
                "STM_STORE_BACKEND": "redis",
                "STM_REDIS_URL": "redis://transport/0",
                "STM_STORE_REDIS_URL": "rediss://store/2",
            },
            "rediss://store/2",
            {},
            "STM_STORE_REDIS_URL",
        ),
        (
            {"STM_STORE_BACKEND": "rqlite", "STM_RQLITE_URL": "https://node:4001"},
            "rqlites://node:4001",
            {},
            "STM_RQLITE_URL",
        ),
        (
            {
                "STM_STORE_BACKEND": "mongo",
                "STM_MONGO_URL": "mongodb://m:27017",
                "STM_MONGO_DB": "stm",
            },
            "mongodb://m:27017",
            {"db_name": "stm"},
            "STM_MONGO_URL",
        ),
        (
            {
                "STM_STORE_BACKEND": "libsql",
                "STM_LIBSQL_DB": "/data/app.db",
                "STM_LIBSQL_SYNC_URL": "libsql://x.turso.io",
                "STM_LIBSQL_AUTH_TOKEN": "tok",
            },
            "libsql+file:////data/app.db",
            {"sync_url": "libsql://x.turso.io", "auth_token": "tok"},
            "STM_LIBSQL_DB",
        ),
        (
            {"STM_STORE_BACKEND": "dynamodb"},
            "dynamodb://us-east-1",
            {},
            "STM_AWS_REGION",
        ),
        (
            {
                "STM_STORE_BACKEND": "dynamodb",
                "STM_AWS_REGION": "eu-west-1",
                "STM_DYNAMODB_ENDPOINT": "http://localhost:8000",
            },
            "dynamodb://eu-west-1?endpoint=http%3A%2F%2Flocalhost%3A8000",
            {},
            "STM_DYNAMODB_ENDPOINT",
        ),
    ],
)
def test_legacy_variables(
    env: dict[str, str], url: str, knobs: dict[str, str], source: str
) -> None:
    found = settings(**env)
    assert (found.url, found.knobs, found.source) == (url, knobs, source)


@pytest.mark.parametrize(
    ("backend", "variable"),
    [
        ("redis", "STM_STORE_REDIS_URL"),
        ("rqlite", "STM_RQLITE_URL"),
        ("mongo", "STM_MONGO_URL"),
        ("libsql", "STM_LIBSQL_DB"),
    ],
)
def test_missing_legacy_variable_is_named(backend: str, variable: str) -> None:
    with pytest.raises(StoreConfigError, match=variable):
        settings(STM_STORE_BACKEND=backend)


def test_third_party_backend_needs_store_url() -> None:
    registry.register(
        registry.StoreBackend(
            name="custom",
            schemes=("custom",),
            store="harel.store.memory:DictStore",
            async_store="harel.store.memory:AsyncDictStore",
            capabilities=CAPABILITIES,
            distribution="custom-dist",
            version="1",
        )
    )
    with pytest.raises(StoreConfigError, match="set STM_STORE_URL"):
        settings(STM_STORE_BACKEND="custom")
    assert settings(STM_STORE_BACKEND="custom", STM_STORE_URL="custom://x").backend == "custom"
