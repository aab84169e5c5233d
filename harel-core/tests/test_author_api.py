"""The store-author API has an edge: first-party backends import harel-core's store layer only
through ``harel.store.author`` (and the contract, errors and harness modules), and its reference
page is current."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import harel.store.author
import harel.store.author.sql
import pytest

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = {
    "harel.store.author",
    "harel.store.author.sql",
    "harel.store.contract",
    "harel.store.errors",
    "harel.model",
    "harel.conformance.harness",
    "harel.conformance.proxy",
    "harel.registry",
}
"""What a backend may import of harel (``harel.conformance.*`` for its test harness only)."""


def _backend_sources() -> list[Path]:
    folders = [*ROOT.glob("harel-store-*/src"), *ROOT.glob("conformance/*-store/src")]
    return sorted(path for folder in folders for path in folder.rglob("*.py"))


def _harel_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "harel" or name.startswith("harel.")}


def test_backends_import_the_store_layer_only_through_the_author_api() -> None:
    sources = _backend_sources()
    assert len(sources) > 50, "the backends were found"
    outside = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in sources
        for module in _harel_imports(path)
        if module not in PUBLIC and not module.startswith("harel.conformance.")
    }
    assert not outside, "\n".join(sorted(outside))


def test_every_author_name_has_a_guarantee() -> None:
    spec = importlib.util.spec_from_file_location("author_api", ROOT / "docs" / "author_api.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = module.render()
    for api in (harel.store.author, harel.store.author.sql):
        for name in api.__all__:
            found = re.search(
                rf"^### (class )?`{name}\b[^\n]*\n(.*?)(?=^###|^## |\Z)", page, re.S | re.M
            )
            assert found is not None and found.group(2).strip(), f"{name} has no docstring"
    stored = (ROOT / "docs" / "store-author-api.md").read_text()
    if stored != page:
        pytest.fail("docs/store-author-api.md is stale: run make api-docs")
