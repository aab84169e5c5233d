"""Discovery through real importlib.metadata with fake distributions built in a tmp dir:
broken, incompatible, garbage and duplicate plugins, and the HAREL_* switches."""

from __future__ import annotations

import textwrap
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harel import registry
from harel.cli import main
from harel.registry._core import DISABLE_VAR, LOAD_VAR, PREFER_VAR, REGISTRY, STRICT_VAR
from harel.store.common.urls import parse_store_url
from harel.store.errors import BackendUnavailable, InvalidStoreURL, PluginError, UnknownScheme
from harel.store.memory import CAPABILITIES as MEMORY_CAPABILITIES

PLUGIN = """
from harel.registry import StoreBackend, hookimpl
from harel.store import Capabilities

@hookimpl
def harel_register_stores(register):
    register(StoreBackend(
        name={name!r},
        schemes={schemes!r},
        store={store!r},
        async_store={async_store!r},
        capabilities=Capabilities(
            persistent=True, multi_process=False, ordered_listing=True, exact_pages=False
        ),
        distribution={dist!r},
        version="1.0",
    ))
"""

MakeDist = Callable[..., str]


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in (LOAD_VAR, DISABLE_VAR, STRICT_VAR, PREFER_VAR):
        monkeypatch.delenv(var, raising=False)
    registry.reset()
    yield
    registry.reset()


@pytest.fixture
def make_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MakeDist:
    """Build an installed-looking distribution (dist-info + entry point + plugin module)."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))

    def build(
        dist: str,
        ep_name: str,
        source: str | None = None,
        *,
        version: str = "1.0",
        requires: tuple[str, ...] = ("harel-core>=0.1",),
        backend: str | None = None,
        schemes: tuple[str, ...] | None = None,
        store: str = "somewhere.sync:Store",
    ) -> str:
        module = f"fake_plugin_{uuid.uuid4().hex[:10]}"
        if source is None:
            name = backend or ep_name
            source = PLUGIN.format(
                name=name,
                schemes=schemes or (name,),
                store=store,
                async_store=store.replace(":", ":Async"),
                dist=dist,
            )
        (root / f"{module}.py").write_text(textwrap.dedent(source))
        info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        metadata = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
        metadata += "".join(f"Requires-Dist: {line}\n" for line in requires)
        (info / "METADATA").write_text(metadata)
        (info / "entry_points.txt").write_text(f"[harel.stores]\n{ep_name} = {module}\n")
        registry.reset()
        return module

    return build


def rows() -> dict[tuple[str, str], registry.BackendInfo]:
    return {(row.name, row.distribution): row for row in registry.available_backends()}


def test_plugin_that_fails_to_import_is_broken_not_fatal(make_dist: MakeDist) -> None:
    make_dist("harel-store-bad", "bad", "raise ImportError('no driver here')\n")
    with pytest.warns(registry.PluginWarning, match="'bad = fake_plugin_.*' .* is broken"):
        table = rows()
    bad = table[("bad", "harel-store-bad")]
    assert bad.status == "broken" and bad.error == "ImportError: no driver here"
    assert table[("memory", "harel-core")].status == "ok"
    with pytest.raises(BackendUnavailable, match="is broken: ImportError: no driver here"):
        registry.get_backend("bad")
    # reported once: later uses are silent
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        registry.available_backends()
        registry.get_backend("memory")


@pytest.mark.parametrize(
    ("source", "error"),
    [
        (
            "from harel.registry import hookimpl\n"
            "@hookimpl\ndef harel_register_stores(register):\n    raise RuntimeError('oops')\n",
            "RuntimeError: oops",
        ),
        (
            "from harel.registry import hookimpl\n"
            "@hookimpl\ndef harel_register_stores(register):\n    register('sqlite')\n",
            "expects a harel.registry.StoreBackend, got str",
        ),
        (
            "def harel_register_stores(register):\n    pass\n",
            "registered no backend",
        ),
        (
            "from harel.registry import hookimpl\n"
            "@hookimpl\ndef harel_register_stores(register, extra):\n    pass\n",
            "PluginValidationError",
        ),
        ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    ],
)
def test_misbehaving_hooks_are_broken(make_dist: MakeDist, source: str, error: str) -> None:
    make_dist("harel-store-odd", "odd", source)
    with pytest.warns(registry.PluginWarning):
        row = rows()[("odd", "harel-store-odd")]
    assert row.status == "broken"
    assert error in (row.error or "")


def test_garbage_descriptor_breaks_the_whole_plugin(make_dist: MakeDist) -> None:
    make_dist("harel-store-g", "g", backend="Not Valid")
    with pytest.warns(registry.PluginWarning, match="invalid backend name"):
        table = rows()
    assert table[("g", "harel-store-g")].status == "broken"
    assert "Not Valid" not in REGISTRY.backends()


def test_incompatible_plugin_is_not_imported(make_dist: MakeDist) -> None:
    import sys

    module = make_dist(
        "harel-store-x",
        "x",
        "raise AssertionError('must not be imported')\n",
        version="0.3",
        requires=("harel-core>=0.3,<0.4", "somedriver>=1"),
    )
    with pytest.warns(registry.PluginWarning, match="incompatible"):
        row = rows()[("x", "harel-store-x")]
    assert row.status == "incompatible"
    assert row.error == (
        "harel-store-x 0.3 requires harel-core>=0.3,<0.4, "
        f"this is harel-core {registry.core_version()}"
    )
    assert module not in sys.modules
    with pytest.raises(BackendUnavailable, match="incompatible"):
        registry.get_backend("x")


def test_requirements_behind_markers_or_absent_are_ignored(make_dist: MakeDist) -> None:
    make_dist("harel-store-m", "m", requires=('harel-core>=99; extra == "dev"',))
    make_dist("harel-store-n", "n", requires=())
    table = rows()
    assert table[("m", "harel-store-m")].status == "ok"
    assert table[("n", "harel-store-n")].status == "ok"


def test_same_name_same_targets_is_a_no_op(make_dist: MakeDist) -> None:
    make_dist("harel-store-twin-a", "twin", store="twinpkg.sync:Store")
    make_dist("harel-store-twin-b", "twin", store="twinpkg.sync:Store")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = [row for row in registry.available_backends() if row.name == "twin"]
    assert not [w for w in caught if "twin" in str(w.message)]
    assert [(row.status, row.distribution) for row in table] == [("ok", "harel-store-twin-a")]


def test_same_name_different_targets_conflict_until_configured(
    make_dist: MakeDist, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_dist("harel-store-one", "dup", store="one.sync:Store")
    make_dist("harel-store-two", "dup", store="two.sync:Store")
    with pytest.warns(registry.PluginWarning, match="harel-store-one .* and harel-store-two"):
        assert len([row for row in registry.available_backends() if row.name == "dup"]) == 2
    table = rows()
    for dist in ("harel-store-one", "harel-store-two"):
        assert table[("dup", dist)].status == "broken"
        assert "different implementations" in (table[("dup", dist)].error or "")
    with pytest.raises(BackendUnavailable, match="HAREL_DISABLE_PLUGINS=harel-store-two"):
        registry.get_backend("dup")
    with pytest.raises(BackendUnavailable, match="broken"):
        registry.open_store("dup://x")

    monkeypatch.setenv(DISABLE_VAR, "harel-store-two")
    registry.reset()
    table = rows()
    assert table[("dup", "harel-store-one")].status == "ok"
    assert table[("dup", "harel-store-two")].status == "disabled"
    assert registry.get_backend("dup").store == "one.sync:Store"

    monkeypatch.delenv(DISABLE_VAR)
    monkeypatch.setenv(LOAD_VAR, "memory,harel-store-two:dup")
    registry.reset()
    assert registry.get_backend("dup").store == "two.sync:Store"
    assert registry.get_backend("memory").name == "memory"
    assert rows()[("sqlite", "harel-store-sqlite")].status == "disabled"


def test_a_plugin_claiming_a_first_party_name_is_ignored(
    make_dist: MakeDist, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_dist("sqlite-fork", "sqlite", store="fork.sync:Store")
    with pytest.warns(registry.PluginWarning, match="sqlite-fork") as caught:
        table = rows()
    message = next(str(w.message) for w in caught if "sqlite-fork" in str(w.message))
    assert "first-party backend 'sqlite' (harel-store-sqlite)" in message
    assert "HAREL_PREFER_PLUGINS=sqlite-fork" in message
    assert table[("sqlite", "harel-store-sqlite")].status == "ok"
    fork = table[("sqlite", "sqlite-fork")]
    assert fork.status == "ignored" and "HAREL_PREFER_PLUGINS=sqlite-fork" in (fork.error or "")
    store = registry.open_store(f"sqlite:///{tmp_path / 'x.db'}")
    assert type(store).__module__ == "harel_store_sqlite.sync"
    store.close()
    from harel import SqliteStore

    assert SqliteStore.__module__ == "harel_store_sqlite.sync"


def test_a_plugin_claiming_a_first_party_scheme_is_ignored(make_dist: MakeDist) -> None:
    make_dist("harel-evil", "evil", schemes=("evil", "sqlite", "memory"), store="evil.s:Store")
    with pytest.warns(registry.PluginWarning, match="the scheme 'sqlite://' and the scheme"):
        table = rows()
    assert table[("evil", "harel-evil")].status == "ignored"
    assert table[("memory", "harel-core")].status == "ok"
    assert registry.backend_for_url("sqlite:///x.db").distribution == "harel-store-sqlite"
    assert registry.backend_for_url("memory://").name == "memory"
    with pytest.raises(BackendUnavailable, match="is ignored"):
        registry.backend_for_url("evil://x")
    # run-time registration cannot take a first-party scheme either
    with pytest.raises(PluginError, match="ignored, the first-party backend keeps it"):
        registry.register(
            registry.StoreBackend(
                name="sneaky",
                schemes=("postgresql",),
                store="x.y:Store",
                async_store="x.y:AsyncStore",
                capabilities=MEMORY_CAPABILITIES,
                distribution="sneaky-dist",
                version="1",
            )
        )


def test_the_user_may_prefer_a_third_party_plugin(
    make_dist: MakeDist, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_dist("sqlite-fork", "sqlite", store="fork.sync:Store")
    monkeypatch.setenv(PREFER_VAR, "sqlite-fork")
    registry.reset()
    table = rows()
    assert table[("sqlite", "sqlite-fork")].status == "ok"
    first_party = table[("sqlite", "harel-store-sqlite")]
    assert first_party.status == "disabled" and "HAREL_PREFER_PLUGINS" in (first_party.error or "")
    assert registry.backend_for_url("sqlite:///x.db").store == "fork.sync:Store"


def test_prefer_also_settles_a_conflict_between_third_parties(
    make_dist: MakeDist, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_dist("harel-store-one", "dup", store="one.sync:Store")
    make_dist("harel-store-two", "dup", store="two.sync:Store")
    monkeypatch.setenv(PREFER_VAR, "harel-store-two")
    registry.reset()
    table = rows()
    assert table[("dup", "harel-store-two")].status == "ok"
    assert table[("dup", "harel-store-one")].status == "disabled"
    assert registry.get_backend("dup").store == "two.sync:Store"


def test_strict_mode_raises_on_a_first_party_clash(
    make_dist: MakeDist, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_dist("sqlite-fork", "sqlite", store="fork.sync:Store")
    monkeypatch.setenv(LOAD_VAR, "memory,sqlite")  # keep the run independent of others
    monkeypatch.setenv(STRICT_VAR, "1")
    registry.reset()
    with pytest.raises(PluginError, match="ignored, the first-party backend keeps it"):
        registry.available_backends()


def test_duplicate_scheme_conflicts(make_dist: MakeDist) -> None:
    make_dist("harel-store-pg-a", "pga", schemes=("pgx",), store="a.sync:Store")
    make_dist("harel-store-pg-b", "pgb", schemes=("pgx", "pgb"), store="b.sync:Store")
    with pytest.warns(registry.PluginWarning, match="scheme 'pgx://'"):
        listed = [row for row in registry.available_backends() if row.name in ("pga", "pgb")]
    assert len(listed) == 2
    table = rows()
    assert table[("pga", "harel-store-pg-a")].status == "broken"
    assert table[("pgb", "harel-store-pg-b")].status == "broken"
    with pytest.raises(BackendUnavailable, match="pgx://"):
        registry.backend_for_url("pgx://host/db")
    with pytest.raises(BackendUnavailable):
        registry.backend_for_url("pgb://host/db")


def test_disable_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_VAR, "*")
    registry.reset()
    table = rows()
    assert {row.status for row in table.values()} == {"disabled"}
    assert table[("memory", "harel-core")].schemes == ("memory",)
    with pytest.raises(BackendUnavailable, match="disabled by HAREL_DISABLE_PLUGINS"):
        registry.open_store("memory://")
    # run-time registration is explicit and still works
    backend = registry.StoreBackend(
        name="mem2",
        schemes=("memory",),
        store="harel.store.memory:DictStore",
        async_store="harel.store.memory:AsyncDictStore",
        capabilities=MEMORY_CAPABILITIES,
        distribution="harel-core",
        version="0",
    )
    registry.register(backend)
    assert type(registry.open_store("memory://")).__name__ == "DictStore"


def test_strict_mode_raises_plugin_errors(
    make_dist: MakeDist, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_dist("harel-store-bad", "bad", "raise ImportError('no driver here')\n")
    monkeypatch.setenv(LOAD_VAR, "memory,sqlite,bad")
    monkeypatch.setenv(STRICT_VAR, "1")
    registry.reset()
    with pytest.raises(PluginError, match="is broken") as info:
        registry.available_backends()
    assert isinstance(info.value.__cause__, ImportError)
    assert not REGISTRY.discovered
    monkeypatch.setenv(STRICT_VAR, "0")
    with pytest.warns(registry.PluginWarning):
        assert rows()[("bad", "harel-store-bad")].status == "broken"


def test_cli_stores_reports_broken_plugins(
    make_dist: MakeDist, capsys: pytest.CaptureFixture[str]
) -> None:
    make_dist("harel-store-bad", "bad", "raise ImportError('no driver here')\n")
    assert main(["stores"]) == 0
    out = capsys.readouterr().out
    assert "broken" in out and "ImportError: no driver here" in out
    assert main(["stores", "--check"]) == 1
    out = capsys.readouterr().out
    assert "bad (harel-store-bad): ImportError: no driver here" in out


def test_opening_the_url_of_a_broken_plugin_says_it_failed_to_load(make_dist: MakeDist) -> None:
    make_dist("harel-store-onefile", "onefile", "raise ImportError('no driver here')\n")
    with pytest.warns(registry.PluginWarning):
        registry.available_backends()
    with pytest.raises(BackendUnavailable) as info:
        registry.open_store("onefile:///data.json")
    message = str(info.value)
    assert "installed but failed to load: onefile (harel-store-onefile 1.0)" in message
    assert "ImportError: no driver here" in message
    assert "no installed store backend" not in message


def test_an_unrelated_broken_plugin_is_named_beside_an_unknown_scheme(
    make_dist: MakeDist,
) -> None:
    make_dist("harel-store-zzz", "zzz", "raise ImportError('no driver here')\n")
    with pytest.warns(registry.PluginWarning):
        registry.available_backends()
    with pytest.raises(UnknownScheme) as info:
        registry.open_store("other:///x")
    assert "installed but failed to load: zzz (harel-store-zzz 1.0)" in str(info.value)


def test_a_discovered_plugin_scheme_is_known_to_url_typo_hints() -> None:
    backend = registry.StoreBackend(
        name="tinydb",
        schemes=("tinydb",),
        store="harel.store.memory:DictStore",
        async_store="harel.store.memory:AsyncDictStore",
        capabilities=MEMORY_CAPABILITIES,
        distribution="harel-tinydb",
        version="0",
    )
    with pytest.raises(InvalidStoreURL, match="expected scheme://"):
        parse_store_url("tinydb:/x")
    registry.register(backend)
    with pytest.raises(InvalidStoreURL, match=r"did you mean tinydb://x\?"):
        parse_store_url("tinydb:/x")
