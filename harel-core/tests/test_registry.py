"""The registry with the real installed backends (memory, sqlite) and run-time plugins."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import harel
import pytest
from harel import registry
from harel.registry._core import DISABLE_VAR, LOAD_VAR, REGISTRY, STRICT_VAR
from harel.registry._descriptor import validate_backend
from harel.registry._firstparty import FIRST_PARTY, FirstParty
from harel.registry._select import store_class
from harel.store import AsyncDictStore, Capabilities, DictStore
from harel.store.errors import (
    BackendNotInstalled,
    BackendUnavailable,
    HarnessUnavailable,
    InvalidStoreURL,
    PluginError,
    UnknownBackend,
    UnknownScheme,
)
from harel.store.memory.testing import MemoryHarness

CAPS = Capabilities(persistent=False, multi_process=False, ordered_listing=True, exact_pages=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in (LOAD_VAR, DISABLE_VAR, STRICT_VAR):
        monkeypatch.delenv(var, raising=False)
    registry.reset()
    yield
    registry.reset()


@pytest.fixture
def ghost(monkeypatch: pytest.MonkeyPatch) -> FirstParty:
    """A first-party table entry whose distribution is surely not installed."""
    entry = FirstParty(
        "ghost", "harel-store-ghost", ("ghost", "ghosts"), "GhostStore", "AsyncGhostStore"
    )
    monkeypatch.setitem(FIRST_PARTY, "ghost", entry)
    return entry


@pytest.fixture
def echo_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A throw-away importable module with store classes that record their from_url call."""
    name = f"harel_echo_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from harel.registry import StoreBackend, hookimpl
            from harel.store import Capabilities

            CAPS = Capabilities(
                persistent=False, multi_process=False, ordered_listing=True, exact_pages=True
            )

            class EchoStore:
                capabilities = CAPS

                def __init__(self, url, knobs):
                    self.url, self.knobs = url, knobs

                @classmethod
                def from_url(cls, url, **knobs):
                    return cls(url, knobs)

            class AsyncEchoStore(EchoStore):
                @classmethod
                async def from_url(cls, url, **knobs):
                    return cls(url, knobs)

            def backend(name="echo", schemes=("echo",), store="EchoStore"):
                return StoreBackend(
                    name=name,
                    schemes=schemes,
                    store=f"{__name__}:{store}",
                    async_store=f"{__name__}:AsyncEchoStore",
                    capabilities=CAPS,
                    distribution="echo-dist",
                    version="1.0",
                )

            @hookimpl
            def harel_register_stores(register):
                register(backend())
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _module(name: str) -> Any:
    __import__(name)
    return sys.modules[name]


def test_import_harel_does_not_discover_and_listing_imports_no_driver() -> None:
    code = textwrap.dedent(
        """
        import sys
        import harel
        import harel.registry as r
        from harel.registry._core import REGISTRY
        print(REGISTRY.discovered, "harel.store.memory._spec" in sys.modules)
        names = sorted(b.name for b in r.available_backends() if b.status == "ok")
        print("memory" in names and "sqlite" in names)
        print(any(m.startswith(("harel_store_sqlite.sync", "aiosqlite")) for m in sys.modules))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "False", "True", "False"]


def test_installed_first_party_backends_are_discovered(ghost: FirstParty) -> None:
    rows = {row.name: row for row in registry.available_backends()}
    memory, sqlite = rows["memory"], rows["sqlite"]
    assert (memory.status, memory.distribution, memory.schemes) == ("ok", "harel-core", ("memory",))
    assert memory.entry_point == "memory = harel.store.memory._spec:SPEC"
    assert memory.capabilities == DictStore.capabilities
    assert (sqlite.status, sqlite.distribution, sqlite.schemes) == (
        "ok",
        "harel-store-sqlite",
        ("sqlite",),
    )
    assert registry.get_backend("sqlite").store == "harel_store_sqlite.sync:SqliteStore"
    assert "ghost" not in rows  # not installed, not listed by default
    everything = {row.name: row for row in registry.available_backends(include_not_installed=True)}
    assert everything["ghost"].status == "not installed"
    assert everything["ghost"].error == "pip install harel-store-ghost"
    assert everything["ghost"].schemes == ("ghost", "ghosts")


def test_get_backend_errors_name_what_to_do(ghost: FirstParty) -> None:
    with pytest.raises(BackendNotInstalled, match="pip install harel-store-ghost") as info:
        registry.get_backend("ghost")
    assert info.value.pip_line == "pip install harel-store-ghost"
    assert isinstance(info.value, ImportError)
    with pytest.raises(UnknownBackend, match="'nope'") as unknown:
        registry.get_backend("nope")
    assert "memory" in str(unknown.value) and "sqlite" in str(unknown.value)


def test_unknown_scheme_names_installed_schemes_and_hides_password() -> None:
    with pytest.raises(UnknownScheme) as info:
        registry.open_store("foo://alice:hunter2@host/db")
    text = str(info.value)
    assert "memory" in text and "sqlite" in text and "foo://" in text
    assert "hunter2" not in text and "alice:***@host" in text
    assert isinstance(info.value, InvalidStoreURL)


def test_first_party_scheme_names_the_pip_line(ghost: FirstParty) -> None:
    with pytest.raises(UnknownScheme, match="pip install harel-store-ghost") as info:
        registry.open_store("ghost://bob:s3cret@db:5432/app")
    assert "s3cret" not in str(info.value)
    with pytest.raises(UnknownScheme, match="pip install harel-store-ghost"):
        registry.backend_for_url("ghosts://cluster.example/db")


@pytest.mark.parametrize("url", ["not a url", "", "redis://u:pw@host:notaport/0"])
def test_malformed_url_is_invalid_store_url(url: str) -> None:
    with pytest.raises(InvalidStoreURL) as info:
        registry.open_store(url)
    assert "pw@" not in str(info.value)


def test_open_store_by_scheme_passes_knobs(tmp_path: Path) -> None:
    store = registry.open_store("memory://", trace_max=7)
    assert isinstance(store, DictStore) and store.trace_max == 7
    sqlite = registry.open_store(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        assert type(sqlite).__name__ == "SqliteStore"
        assert sqlite.load("missing") is None
    finally:
        sqlite.close()


@pytest.mark.anyio
async def test_open_async_store(tmp_path: Path) -> None:
    store = await registry.open_async_store("memory://", trace_max=3)
    assert isinstance(store, AsyncDictStore) and store.trace_max == 3
    sqlite = await registry.open_async_store(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        assert type(sqlite).__name__ == "AsyncSqliteStore"
        assert await sqlite.load("missing") is None
    finally:
        await sqlite.close()


def test_runtime_register_descriptor_and_open(echo_module: str) -> None:
    backend = _module(echo_module).backend()
    assert registry.register(backend) == [backend]
    store = registry.open_store("echo://h/x?a=1", extra=2)
    assert type(store).__name__ == "EchoStore"
    assert (store.url, store.knobs) == ("echo://h/x?a=1", {"extra": 2})
    row = next(r for r in registry.available_backends() if r.name == "echo")
    assert (row.status, row.entry_point, row.distribution) == ("ok", None, "echo-dist")
    registry.unregister("echo")
    with pytest.raises(UnknownScheme):
        registry.open_store("echo://h/x")
    with pytest.raises(UnknownBackend):
        registry.unregister("echo")


@pytest.mark.anyio
async def test_runtime_register_plugin_module_and_async_open(echo_module: str) -> None:
    module = _module(echo_module)
    added = registry.register(module)
    assert [b.name for b in added] == ["echo"]
    store = await registry.open_async_store("echo://x", k="v")
    assert type(store).__name__ == "AsyncEchoStore" and store.knobs == {"k": "v"}
    # an identical twin is a no-op
    registry.register(module.backend())
    assert [r.name for r in registry.available_backends()].count("echo") == 1


def test_runtime_conflicts_and_garbage_raise(echo_module: str) -> None:
    module = _module(echo_module)
    registry.register(module.backend())
    with pytest.raises(PluginError, match="echo-dist") as info:
        registry.register(module.backend(store="AsyncEchoStore"))
    assert "different implementations" in str(info.value)
    with pytest.raises(PluginError, match="scheme 'sqlite://'"):
        registry.register(module.backend(name="other", schemes=("sqlite",)))
    # the failed registrations changed nothing
    assert registry.get_backend("echo").store.endswith(":EchoStore")
    assert registry.backend_for_url("sqlite:///x").name == "sqlite"
    with pytest.raises(PluginError, match="invalid backend name"):
        registry.register(module.backend(name="Bad Name"))
    with pytest.raises(PluginError, match="registered no backend"):
        registry.register(object())

    class Garbage:
        @registry.hookimpl
        def harel_register_stores(self, register: Any) -> None:
            register({"name": "garbage"})

    with pytest.raises(PluginError, match=r"expects a harel\.registry\.StoreBackend, got dict"):
        registry.register(Garbage())

    class Raises:
        @registry.hookimpl
        def harel_register_stores(self, register: Any) -> None:
            raise RuntimeError("boom")

    with pytest.raises(PluginError, match="RuntimeError: boom"):
        registry.register(Raises())
    assert "garbage" not in REGISTRY.backends()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": ""}, "invalid backend name"),
        ({"name": "9lives"}, "invalid backend name"),
        ({"schemes": ()}, "non-empty tuple"),
        ({"schemes": ["x"]}, "non-empty tuple"),
        ({"schemes": ("Postgres",)}, "invalid URL scheme"),
        ({"schemes": ("x", "x")}, "listed twice"),
        ({"store": "no_colon.Store"}, "import string"),
        ({"async_store": "mod:"}, "import string"),
        ({"harness": "mod"}, "harness"),
        ({"local_url": "other:///{workdir}/x"}, "local_url"),
        ({"local_url": 5}, "local_url"),
        ({"capabilities": {"persistent": True}}, "Capabilities"),
        ({"distribution": " "}, "distribution"),
        ({"version": "  "}, "version"),
    ],
)
def test_validation_rejects_garbage(changes: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {
        "name": "ok",
        "schemes": ("ok",),
        "store": "pkg.mod:Store",
        "async_store": "pkg.mod:AsyncStore",
        "capabilities": CAPS,
        "distribution": "dist",
        "version": "1",
    }
    fields.update(changes)
    with pytest.raises(PluginError, match=message):
        validate_backend(registry.StoreBackend(**fields))


def test_from_harel_import_store_classes(ghost: FirstParty) -> None:
    from harel import AsyncSqliteStore, SqliteStore
    from harel_store_sqlite.aio import AsyncSqliteStore as RealAsync
    from harel_store_sqlite.sync import SqliteStore as Real

    assert SqliteStore is Real and AsyncSqliteStore is RealAsync
    with pytest.raises(ImportError, match="pip install harel-store-ghost"):
        from harel import GhostStore  # type: ignore[attr-defined]  # noqa: F401
    with pytest.raises(ImportError, match="pip install harel-store-ghost"):
        from harel import AsyncGhostStore  # type: ignore[attr-defined]  # noqa: F401
    with pytest.raises(AttributeError):
        harel.NoSuchStore  # noqa: B018
    with pytest.raises(AttributeError):
        harel.something_else  # noqa: B018


def test_private_names_do_not_trigger_discovery() -> None:
    for name in ("__wrapped__", "__test__", "_private", "pytest_plugins"):
        assert not hasattr(harel, name)
    assert not REGISTRY.discovered


def test_third_party_class_name_resolves_through_registry(echo_module: str) -> None:
    registry.register(_module(echo_module).backend())
    assert harel.EchoStore.__name__ == "EchoStore"
    assert harel.AsyncEchoStore.__name__ == "AsyncEchoStore"


def test_disabled_backend_import_error_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_VAR, "sqlite")
    registry.reset()
    with pytest.raises(ImportError, match="disabled by HAREL_DISABLE_PLUGINS"):
        from harel import SqliteStore  # noqa: F401


@pytest.mark.anyio
async def test_memory_harness(tmp_path: Path) -> None:
    harness = registry.harness_for_url("memory://", tmp_path)
    assert isinstance(harness, MemoryHarness)
    assert harness.capabilities == DictStore.capabilities
    first, second = harness.open_sync(), harness.open_sync()
    assert first.data is second.data
    async_store = await harness.open_async()
    assert isinstance(async_store, AsyncDictStore) and async_store.data is first.data
    other = registry.harness_for_url("memory://shared", tmp_path)
    assert isinstance(other, MemoryHarness) and other.data is not harness.data
    harness.destroy()
    assert harness.open_sync().data is not first.data
    with pytest.raises(InvalidStoreURL):
        registry.harness_for_url("memory://?bogus=1", tmp_path)


def test_harness_missing_is_a_clear_error(echo_module: str, tmp_path: Path) -> None:
    registry.register(_module(echo_module).backend())
    with pytest.raises(HarnessUnavailable, match="harel conformance URL"):
        registry.harness_for_url("echo://x", tmp_path)


def test_check_backend(echo_module: str) -> None:
    assert registry.check_backend(registry.get_backend("memory")) == []
    assert registry.check_backend(registry.get_backend("sqlite")) == []
    broken = _module(echo_module).backend(store="Missing")
    problems = registry.check_backend(broken)
    assert len(problems) == 1 and "cannot import its store class" in problems[0]
    with pytest.raises(BackendUnavailable, match="Missing"):
        store_class(broken)


def test_public_names() -> None:
    assert sorted(registry.__all__) == sorted(
        [
            "BackendInfo",
            "PluginWarning",
            "StoreBackend",
            "StoreSettings",
            "available_backends",
            "backend_for_url",
            "check_backend",
            "core_version",
            "get_backend",
            "harness_for_url",
            "harness_spec",
            "hookimpl",
            "open_async_store",
            "open_store",
            "register",
            "reset",
            "store_from_env",
            "store_settings_from_env",
            "unregister",
        ]
    )
    public = {name for name in vars(registry) if not name.startswith("_")}
    assert public - set(registry.__all__) == set()  # nothing re-exported outside __all__
    import harel.model

    assert not set(registry.__all__) & set(dir(harel.model))
    assert not hasattr(registry, "Status")


@pytest.mark.parametrize(
    ("plugin", "forbidden"),
    [
        ("harel.store.memory._spec", ("harel.store.memory.sync", "harel.store.memory.aio")),
        ("harel_store_sqlite._spec", ("sqlite3", "aiosqlite", "harel_store_sqlite.sync")),
    ],
)
def test_importing_a_plugin_loads_no_engine_and_no_driver(
    plugin: str, forbidden: tuple[str, ...]
) -> None:
    code = (
        f"import sys, {plugin}\n"
        "print([m for m in sys.modules if m.startswith(('harel.engine',) + "
        f"{forbidden!r})])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_backend_version_defaults_to_the_installed_distribution() -> None:
    from importlib import metadata

    from harel.registry import StoreBackend
    from harel.store.memory import CAPABILITIES

    def backend(distribution: str) -> StoreBackend:
        return StoreBackend(
            name="probe",
            schemes=("probe",),
            store="m:S",
            async_store="m:A",
            capabilities=CAPABILITIES,
            distribution=distribution,
        )

    assert backend("harel-core").version == metadata.version("harel-core")
    assert backend("harel-no-such-distribution").version == "0+unknown"
