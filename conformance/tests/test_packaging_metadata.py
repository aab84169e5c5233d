"""Every distribution as the package index would get it: the metadata of its built wheel.

One module-scoped build (``uv build --wheel --all-packages``, else ``python -m build`` per
member) makes a wheel of every workspace member; the tests read each wheel's ``METADATA``
and license files, never install anything.  The repository's own files (pyprojects, the
LICENSE copies, the changelog) are checked by the fast tests at the end, without a build.
"""

from __future__ import annotations

import ast
import email.message
import email.parser
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 600
ROOT = tomllib.loads((REPO / "pyproject.toml").read_text())
RELEASE = ROOT["tool"]["harel"]["release"]
BASE = str(RELEASE["repository"]).rstrip("/")
BLOB = f"{BASE}/blob/{RELEASE['branch']}/"
LICENSE = (REPO / "LICENSE").read_text()


def _members() -> dict[str, Path]:
    """Every workspace member (the root's ``members`` globs), by distribution name."""
    found: dict[str, Path] = {}
    for pattern in ROOT["tool"]["uv"]["workspace"]["members"]:
        for folder in sorted(REPO.glob(pattern)):
            pyproject = folder / "pyproject.toml"
            if pyproject.is_file():
                found[tomllib.loads(pyproject.read_text())["project"]["name"]] = folder
    return found


MEMBERS = _members()


def _core_version() -> str:
    """``harel.__version__`` as written in the source, read without importing it."""
    tree = ast.parse((REPO / "harel-core" / "src" / "harel" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            return node.value.value
    raise AssertionError("harel/__init__.py has no __version__ literal")


@dataclass(frozen=True)
class Wheel:
    """One built wheel: its distribution, source folder, parsed METADATA and file names."""

    name: str
    folder: Path
    metadata: email.message.Message
    files: dict[str, bytes]

    def field(self, key: str) -> list[str]:
        return [str(value) for value in self.metadata.get_all(key, [])]

    @property
    def description(self) -> str:
        payload = self.metadata.get_payload()
        assert isinstance(payload, str)
        return payload

    def dist_info(self, path: str) -> bytes | None:
        for name, data in self.files.items():
            parts = name.split("/")
            if len(parts) > 1 and parts[0].endswith(".dist-info") and "/".join(parts[1:]) == path:
                return data
        return None


def _clean_env() -> dict[str, str]:
    return {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"} and not key.startswith("HAREL_")
    }


def _build(out_dir: Path) -> None:
    uv = REPO / ".uv" / "bin" / "uv"
    commands: list[list[str]]
    if uv.exists():
        commands = [[str(uv), "build", "--wheel", "--all-packages", "--out-dir", str(out_dir)]]
    else:
        commands = [
            [sys.executable, "-m", "build", "--wheel", "--outdir", str(out_dir), str(folder)]
            for folder in MEMBERS.values()
        ]
    for command in commands:
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=_clean_env(),
            cwd=REPO,
            timeout=TIMEOUT,
            check=False,
        )
        output = f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        assert result.returncode == 0, f"{command}\n{output}"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Wheel]]:
    out_dir = tmp_path_factory.mktemp("metadata-wheels")
    _build(out_dir)
    built: dict[str, Wheel] = {}
    for name, folder in MEMBERS.items():
        (path,) = out_dir.glob(f"{name.replace('-', '_')}-*.whl")
        with zipfile.ZipFile(path) as archive:
            files = {info.filename: archive.read(info) for info in archive.infolist()}
        (raw,) = [data for file, data in files.items() if file.endswith(".dist-info/METADATA")]
        built[name] = Wheel(name, folder, email.parser.BytesParser().parsebytes(raw), files)
    yield built
    shutil.rmtree(out_dir, ignore_errors=True)


_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
_HTML = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)""", re.IGNORECASE)


def links(markdown: str) -> list[str]:
    """Every link target of ``markdown`` outside code: inline, reference and HTML ones."""
    prose = _INLINE_CODE.sub("", _FENCE.sub("", markdown))
    return [m.group(1) for pattern in (_LINK, _REFERENCE, _HTML) for m in pattern.finditer(prose)]


def test_the_link_finder_sees_relative_links_and_skips_code() -> None:
    text = (
        "see [core](../harel-core/README.md) and [x][r], `[a](b.md)`\n\n"
        "[r]: docs/x.md\n\n```python\nf(x)[0](y)\n```\n<a href='a.md'>a</a>\n"
    )
    assert links(text) == ["../harel-core/README.md", "docs/x.md", "a.md"]


@pytest.mark.slow
def test_every_workspace_member_builds_a_wheel(wheels: dict[str, Wheel]) -> None:
    assert set(wheels) == set(MEMBERS)
    assert len(MEMBERS) >= 9  # core, seven backends, the example store


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MEMBERS))
def test_the_license_ships_in_the_wheel(wheels: dict[str, Wheel], name: str) -> None:
    wheel = wheels[name]
    assert wheel.field("Metadata-Version")[0] >= "2.4", "PEP 639 license fields need 2.4"
    assert wheel.field("License-Expression") == ["MIT"]
    assert wheel.field("License-File") == ["LICENSE"]
    assert wheel.field("License") == [], "the legacy License field is superseded"
    assert not [c for c in wheel.field("Classifier") if c.startswith("License ::")]
    shipped = wheel.dist_info("licenses/LICENSE")
    assert shipped is not None, sorted(wheel.files)
    assert shipped.decode() == LICENSE


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MEMBERS))
def test_the_index_page_has_authors_classifiers_and_urls(
    wheels: dict[str, Wheel], name: str
) -> None:
    wheel = wheels[name]
    assert wheel.field("Author") or wheel.field("Author-email")
    classifiers = wheel.field("Classifier")
    assert "Programming Language :: Python :: 3 :: Only" in classifiers
    assert "Typing :: Typed" in classifiers
    assert any(c.startswith("Development Status ::") for c in classifiers)
    urls = dict(entry.split(", ", 1) for entry in wheel.field("Project-URL"))
    assert {"Homepage", "Repository", "Documentation", "Changelog"} <= set(urls)
    for label, url in urls.items():
        assert url == BASE or url.startswith(f"{BASE}/"), f"{label}: {url} is not under {BASE}"
    assert wheel.field("Description-Content-Type") == ["text/markdown"]


def _repository_file(url: str) -> Path | None:
    """The repository file an absolute ``BLOB`` link points at, ``None`` for other URLs."""
    if not url.startswith(BLOB):
        return None
    relative = posixpath.normpath(url[len(BLOB) :].split("#", 1)[0])
    assert not relative.startswith(".."), f"{url} leaves the repository"
    return REPO / relative


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MEMBERS))
def test_the_description_links_are_absolute_and_resolve(
    wheels: dict[str, Wheel], name: str
) -> None:
    wheel = wheels[name]
    readme = (wheel.folder / "README.md").read_text()
    assert wheel.description.startswith(readme.split("\n", 1)[0]), "the README is the description"
    targets = links(wheel.description)
    assert len(targets) == len(links(readme)), "a rewrite lost or added a link"
    for target in targets:
        assert re.match(r"(https?|mailto):", target) or target.startswith("#"), (
            f"{name}: {target!r} is relative: it breaks on the package index"
        )
        path = _repository_file(target)
        if path is not None:
            assert path.exists(), f"{name}: {target} names no file of the repository"


@pytest.mark.slow
def test_the_version_is_written_once(wheels: dict[str, Wheel]) -> None:
    core = tomllib.loads((MEMBERS["harel-core"] / "pyproject.toml").read_text())["project"]
    assert "version" not in core, "harel-core's version lives in harel/__init__.py only"
    assert "version" in core["dynamic"]
    assert wheels["harel-core"].field("Version") == [_core_version()]
    for name, wheel in wheels.items():
        project = tomllib.loads((wheel.folder / "pyproject.toml").read_text())["project"]
        assert wheel.field("Version") == [project.get("version", _core_version())]
        if name == "harel-core":
            continue
        for path in (wheel.folder / "src").rglob("*.py"):
            assert "__version__ =" not in path.read_text(), f"{path}: a second version"


@pytest.mark.slow
def test_no_wheel_forces_a_psycopg_implementation(wheels: dict[str, Wheel]) -> None:
    for name, wheel in wheels.items():
        for requirement in wheel.field("Requires-Dist"):
            if re.match(r"psycopg\[", requirement):
                assert "extra ==" in requirement, f"{name} forces {requirement}"
    postgres = wheels["harel-store-postgres"]
    assert "binary" in postgres.field("Provides-Extra")
    required = postgres.field("Requires-Dist")
    assert any(re.fullmatch(r"psycopg>=[\d.]+", r) for r in required), required
    assert any(r.startswith("psycopg[binary]") and "extra == 'binary'" in r for r in required)


@pytest.mark.slow
def test_the_changelog_names_every_released_version(wheels: dict[str, Wheel]) -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    for wheel in wheels.values():
        (version,) = wheel.field("Version")
        assert re.search(rf"^## \[?{re.escape(version)}\]?", changelog, re.MULTILINE), version


# -- the repository's own files (no build) ------------------------------------------------


@pytest.mark.parametrize("name", sorted(MEMBERS))
def test_each_distribution_folder_holds_the_license(name: str) -> None:
    folder = MEMBERS[name]
    assert (folder / "LICENSE").read_text() == LICENSE, f"{folder}/LICENSE differs from LICENSE"
    project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]


def test_the_installed_core_reports_the_source_version() -> None:
    import importlib.metadata

    import harel

    assert harel.__version__ == _core_version()
    assert importlib.metadata.version("harel-core") == harel.__version__


def test_harel_conformance_help_names_the_extra(capsys: pytest.CaptureFixture[str]) -> None:
    from harel.cli import main

    code = main(["conformance", "--help"])
    out = capsys.readouterr().out
    assert code == 0
    assert 'pip install "harel-core[conformance]"' in " ".join(out.split())


@pytest.mark.parametrize("name", sorted(MEMBERS))
def test_each_pyproject_uses_the_one_project_url(name: str) -> None:
    text = (MEMBERS[name] / "pyproject.toml").read_text()
    urls = re.findall(r"https?://[^\s'\"\])]+", text)
    assert urls, f"{name}: no project URL"
    for url in urls:
        assert url == BASE or url.startswith(f"{BASE}/"), f"{name}: {url} is not under {BASE}"
