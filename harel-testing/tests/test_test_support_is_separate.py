"""Test support stays out of the runtime wheels (issue 18).

* no runtime distribution declares a web server, moto, mongomock or ``harel-testing`` (not even
  under an extra): those are ``harel-testing``'s extras;
* no runtime source imports a server module, and every import of test-only code there is
  inside ``needs_harel_testing`` (or under ``TYPE_CHECKING``);
* a backend's harness (and ``local=moto``) without ``harel-testing`` raises
  ``HarelTestingNotInstalled`` naming the ``pip install harel-testing[extra]`` line
  (absence is simulated by ``None`` entries in ``sys.modules``).
"""

from __future__ import annotations

import ast
import importlib.metadata
import pickle
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from harel.registry import open_store
from harel.store.common.lazy import needs_harel_testing
from harel.store.errors import HarelTestingNotInstalled, StoreConfigError
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
RUNTIME = {
    "harel-core",
    "harel-store-sqlite",
    "harel-store-libsql",
    "harel-store-rqlite",
    "harel-store-postgres",
    "harel-store-redis",
    "harel-store-mongo",
    "harel-store-dynamodb",
    "harel-example-jsondir",
    "harel-tutorial-store",
}
"""Every distribution a user installs to run stores (harel-testing is the only test one)."""
TEST_ONLY = {
    "harel-testing",
    "moto",
    "mongomock",
    "mongomock-motor",
    "motor",
    "werkzeug",
    "flask",
    "flask-cors",
    "uvicorn",
    "aiohttp",
}
"""Distributions a runtime wheel must not pull in, under any extra."""
SERVING_EXTRAS = {("harel-core", "monitor"): {"uvicorn"}}
"""Where a server is the feature itself: ``harel monitor`` (``harel-core[monitor]``) serves
its pages with uvicorn."""
TEST_ONLY_MODULES = {"harel_testing", "moto", "mongomock", "mongomock_motor", "motor"}
SERVER_MODULES = {"http.server", "socketserver", "wsgiref", "werkzeug", "flask"}


def _name(requirement: str) -> str:
    return Requirement(requirement).name.lower().replace("_", "-")


def _installed_runtime() -> list[str]:
    found = {
        dist.metadata["Name"].lower()
        for dist in importlib.metadata.distributions()
        if dist.metadata["Name"] and dist.metadata["Name"].lower().startswith("harel-")
    }
    return sorted(found - {"harel-testing", "harel-workspace"})


def test_every_runtime_distribution_is_installed_and_checked() -> None:
    assert set(_installed_runtime()) == RUNTIME


def _allowed(distribution: str, requirement: str) -> set[str]:
    """What ``requirement`` may pull in: a serving extra's server, else nothing."""
    marker = Requirement(requirement).marker
    return set().union(
        *(
            allowed
            for (owner, extra), allowed in SERVING_EXTRAS.items()
            if owner == distribution
            and marker is not None
            and marker.evaluate({"extra": extra})
            and not marker.evaluate({"extra": ""})
        )
    )


@pytest.mark.parametrize("distribution", sorted(RUNTIME))
def test_no_runtime_distribution_requires_test_support(distribution: str) -> None:
    pulled = sorted(
        name
        for text in importlib.metadata.requires(distribution) or []
        if (name := _name(text)) in TEST_ONLY and name not in _allowed(distribution, text)
    )
    assert pulled == [], f"{distribution} requires {pulled}: move them to harel-testing's extras"


def test_the_extras_of_harel_testing_bring_each_stand_in() -> None:
    extras: dict[str, set[str]] = {}
    for text in importlib.metadata.requires("harel-testing") or []:
        requirement = Requirement(text)
        marker = str(requirement.marker or "")
        extra = marker.split("extra ==", 1)[1].strip(" '\"") if "extra ==" in marker else ""
        extras.setdefault(extra, set()).add(_name(text))
    assert extras[""] == {"harel-core"}
    assert {"harel-store-rqlite"} == extras["rqlite"]
    assert {"harel-store-dynamodb", "moto"} == extras["dynamodb"]
    assert {"harel-store-mongo", "mongomock", "mongomock-motor", "motor"} == extras["mongo"]
    assert {"harel-store-redis"} == extras["redis"]


def _runtime_sources() -> list[Path]:
    folders = [REPO / "harel-core" / "src", REPO / "conformance" / "example-store" / "src"]
    folders += sorted(REPO.glob("harel-store-*/src"))
    files = [path for folder in folders for path in sorted(folder.rglob("*.py"))]
    assert len(files) > 100, folders
    return files


def _guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether ``node`` sits in ``with needs_harel_testing(...)`` or ``if TYPE_CHECKING``."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                call = item.context_expr
                if isinstance(call, ast.Call) and ast.unparse(call.func) == "needs_harel_testing":
                    return True
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            return True
    return False


def test_runtime_sources_import_test_support_only_lazily() -> None:
    problems: list[str] = []
    for path in _runtime_sources():
        text = path.read_text()
        if not any(module in text for module in TEST_ONLY_MODULES | SERVER_MODULES):
            continue  # the module names appear nowhere: no import of them either
        tree = ast.parse(text, str(path))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            where = f"{path.relative_to(REPO)}:{node.lineno}"
            for name in names:
                if any(name == m or name.startswith(f"{m}.") for m in SERVER_MODULES):
                    problems.append(f"{where} imports the server module {name}")
                root = name.partition(".")[0]
                if root in TEST_ONLY_MODULES and not _guarded(node, parents):
                    problems.append(f"{where} imports {name} outside needs_harel_testing")
    assert problems == []


def _absent(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def _check(error: pytest.ExceptionInfo[HarelTestingNotInstalled], extra: str) -> None:
    assert isinstance(error.value, StoreConfigError)
    assert isinstance(error.value, ImportError)
    assert error.value.extra == extra
    assert f"pip install harel-testing[{extra}]" in str(error.value)


def test_the_rqlite_harness_names_the_pip_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from harel_store_rqlite.testing import harness_from_url

    _absent(monkeypatch, "harel_testing.rqlite")
    with pytest.raises(HarelTestingNotInstalled) as error:
        harness_from_url("rqlite://local-fake", tmp_path)
    _check(error, "rqlite")
    assert list(tmp_path.iterdir()) == [], "nothing is created before the import fails"


def test_local_moto_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    _absent(monkeypatch, "harel_testing.dynamodb")
    with pytest.raises(HarelTestingNotInstalled) as error:
        open_store("dynamodb://harel-absent?local=moto")
    _check(error, "dynamodb")


def test_the_moto_server_without_moto_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from harel_testing.dynamodb import MotoServer

    _absent(monkeypatch, "moto.moto_server.werkzeug_app")
    with pytest.raises(HarelTestingNotInstalled) as error:
        MotoServer()
    _check(error, "dynamodb")
    assert "moto" in error.value.missing


def test_the_mongo_plan_runner_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from harel_store_mongo.testing import run_plan

    def plan() -> Generator[Any, Any, None]:
        yield from ()

    _absent(monkeypatch, "harel_testing.mongo")
    with pytest.raises(HarelTestingNotInstalled) as error:
        run_plan(plan())
    _check(error, "mongo")


def test_the_mongomock_harness_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from harel_store_mongo.testing import MongomockHarness

    _absent(monkeypatch, "mongomock")
    with pytest.raises(HarelTestingNotInstalled) as error:
        MongomockHarness()
    _check(error, "mongo")
    assert error.value.missing == "mongomock"


def test_other_import_errors_pass_through_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    _absent(monkeypatch, "harel_absent_dependency")
    with pytest.raises(ModuleNotFoundError) as error, needs_harel_testing("rqlite", "moto"):
        import harel_absent_dependency  # type: ignore[import-not-found]  # noqa: F401
    assert not isinstance(error.value, HarelTestingNotInstalled)
    assert error.value.name == "harel_absent_dependency"


def test_the_error_pickles_with_its_pip_line() -> None:
    error = HarelTestingNotInstalled("harel_testing.redis", "redis")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is HarelTestingNotInstalled
    assert str(copy) == str(error)
    assert copy.pip_line == "pip install harel-testing[redis]"
    assert HarelTestingNotInstalled("harel_testing").pip_line == "pip install harel-testing"
