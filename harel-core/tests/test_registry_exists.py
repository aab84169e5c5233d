"""The ``exists`` hook of a backend's registration (``StoreBackend.exists``): how
``open_store(url, create=False)`` learns whether storage exists without creating it."""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from harel import registry
from harel.registry._firstparty import FIRST_PARTY
from harel.registry._select import store_exists
from harel.store import Capabilities
from harel.store.errors import BackendUnavailable, PluginError, StoreNotFound

CAPS = Capabilities(persistent=False, multi_process=False, ordered_listing=True, exact_pages=True)


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    registry.reset()
    yield
    registry.reset()


@pytest.fixture
def hook_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"exists_hook_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            CALLS = []

            def exists(url, **knobs):
                CALLS.append((url, knobs))
                return url.endswith("/there")

            not_callable = 42
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def custom(exists: str | None) -> registry.StoreBackend:
    return registry.StoreBackend(
        name="custom",
        schemes=("custom",),
        store="harel.store.memory.sync:DictStore",
        async_store="harel.store.memory.aio:AsyncDictStore",
        capabilities=CAPS,
        distribution="custom-dist",
        version="1",
        exists=exists,
    )


def test_the_hook_decides_and_gets_the_open_knobs(hook_module: str) -> None:
    registry.register(custom(f"{hook_module}:exists"))
    with pytest.raises(StoreNotFound, match=r"there is no custom store at custom://h/typo"):
        registry.open_store("custom://h/typo", create=False, connect_retries=0)
    backend = registry.get_backend("custom")
    assert store_exists(backend, "custom://h/there") is True
    calls = __import__(hook_module).CALLS
    assert calls == [("custom://h/typo", {"connect_retries": 0}), ("custom://h/there", {})]


def test_without_a_hook_a_third_party_store_cannot_tell() -> None:
    registry.register(custom(None))
    assert store_exists(registry.get_backend("custom"), "custom://h/x") is None


def test_a_broken_hook_is_named(hook_module: str) -> None:
    registry.register(custom(f"{hook_module}:not_callable"))
    with pytest.raises(PluginError, match="is not callable"):
        registry.open_store("custom://h/x", create=False)
    registry.reset()
    registry.register(custom(f"{hook_module}_gone:exists"))
    with pytest.raises(BackendUnavailable, match="cannot import its existence check"):
        registry.open_store("custom://h/x", create=False)
    assert "cannot import its existence check" in " ".join(
        registry.check_backend(registry.get_backend("custom"))
    )


def test_the_hook_must_be_an_import_string() -> None:
    with pytest.raises(PluginError, match="exists='no import string'"):
        registry.register(custom("no import string"))


def test_every_installed_first_party_backend_declares_its_hook() -> None:
    installed = {info.name: info for info in registry.available_backends()}
    for name, entry in FIRST_PARTY.items():
        if name == "memory" or name not in installed:
            continue  # memory's rule is core's own
        backend = installed[name].backend
        module = entry.distribution.replace("-", "_")  # harel-store-redis: harel_store_redis
        assert backend is not None and backend.exists == f"{module}._exists:store_exists", name
        assert installed[name].as_dict()["exists"] == backend.exists


@pytest.mark.parametrize("library", ["asyncio", "trio"])
def test_the_async_open_asks_the_hook_too(hook_module: str, library: str) -> None:
    if library == "trio":
        pytest.importorskip("trio")
    registry.register(custom(f"{hook_module}:exists"))

    async def main() -> None:
        with pytest.raises(StoreNotFound, match="there is no custom store"):
            await registry.open_async_store("custom://h/typo", create=False)

    anyio.run(main, backend=library)
    assert __import__(hook_module).CALLS == [("custom://h/typo", {})]
