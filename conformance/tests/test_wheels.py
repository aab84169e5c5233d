"""The distributions as a user gets them: built wheels in a fresh virtualenv.

One module-scoped virtualenv holds only the ``harel-core[conformance]`` and
``harel-store-sqlite`` wheels (their other dependencies come from the package index); the
tests then add and remove the example store and a plugin built for a future harel-core, and
check what ``harel stores`` reports each time.  The tests run in file order and share the
venv, so each one leaves it as it found it.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MEMBERS = {
    "harel-core": REPO / "harel-core",
    "harel-store-sqlite": REPO / "harel-store-sqlite",
    "harel-example-jsondir": REPO / "conformance" / "example-store",
}
TIMEOUT = 900


def _clean_env(extra_path: Path | None = None) -> dict[str, str]:
    """The caller's environment without anything that would leak the workspace into a venv."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP"}
        and not key.startswith("HAREL_")
    }
    if extra_path is not None:
        env["PATH"] = f"{extra_path}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run(
    args: list[str | Path], *, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(arg) for arg in args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=TIMEOUT,
        check=False,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, (
        f"{' '.join(result.args)} exited {result.returncode}\n"
        f"--- stdout\n{result.stdout[-5000:]}\n--- stderr\n{result.stderr[-5000:]}"
    )
    return result


def _build_wheel(member: Path, out_dir: Path, env: dict[str, str]) -> None:
    uv = REPO / ".uv" / "bin" / "uv"
    if uv.exists():
        command: list[str | Path] = [uv, "build", "--wheel", "--out-dir", out_dir, member]
    else:
        command = [sys.executable, "-m", "build", "--wheel", "--outdir", out_dir, member]
    _ok(_run(command, env=env, cwd=REPO))


def _wheel(out_dir: Path, distribution: str) -> Path:
    stem = distribution.replace("-", "_")
    (found,) = out_dir.glob(f"{stem}-*.whl")
    return found


@dataclass
class Venv:
    """A fresh virtualenv and helpers to run things in it."""

    root: Path
    wheels: Path
    scratch: Path
    env: dict[str, str]

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return _run(list(args), env=self.env, cwd=self.scratch)

    def pip(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return _ok(self.run(self.bin / "python", "-m", "pip", *args, "--disable-pip-version-check"))

    def python(self, code: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(self.bin / "python", "-c", textwrap.dedent(code), *args)

    def harel(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(self.bin / "harel", *args)

    def stores(self) -> dict[str, dict[str, object]]:
        result = _ok(self.harel("stores", "--json"))
        assert result.stderr == "", result.stderr
        return {row["name"]: row for row in json.loads(result.stdout)}

    def wheel(self, distribution: str) -> Path:
        return _wheel(self.wheels, distribution)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    base = tmp_path_factory.mktemp("wheels")
    wheels, scratch, root = base / "dist", base / "scratch", base / "venv"
    scratch.mkdir()
    env = _clean_env()
    for member in MEMBERS.values():
        _build_wheel(member, wheels, env)
    _ok(_run([sys.executable, "-m", "venv", root], env=env, cwd=scratch))
    venv = Venv(root, wheels, scratch, _clean_env(root / "bin"))
    venv.env["VIRTUAL_ENV"] = str(root)
    core = venv.wheel("harel-core")
    venv.pip("install", "--quiet", f"{core}[conformance]", venv.wheel("harel-store-sqlite"))
    yield venv
    shutil.rmtree(base, ignore_errors=True)


def test_only_the_installed_wheels_are_listed(venv: Venv) -> None:
    rows = venv.stores()
    assert set(rows) == {"memory", "sqlite"}
    assert rows["sqlite"]["status"] == "ok"
    assert rows["sqlite"]["distribution"] == "harel-store-sqlite"
    assert rows["sqlite"]["version"] == "0.1.0"
    assert rows["memory"]["distribution"] == "harel-core"
    # the workspace is not visible: the venv runs the installed wheel, not the source tree
    where = _ok(venv.python("import harel, sys; print(harel.__file__)")).stdout
    assert where.startswith(str(venv.root)), where


def test_the_acceptance_check_works_from_wheels(venv: Venv) -> None:
    result = venv.python(
        """
        import sys
        from harel import Execution, SqliteStore
        store = SqliteStore.from_url("sqlite:///" + sys.argv[1])
        exe = Execution(id="acceptance", definition_id="demo", context={"n": 1})
        store.save(exe)
        again = store.load("acceptance")
        assert again is not None and again.version == 1 and again.context == {"n": 1}, again
        store.close()
        print("ok", type(store).__module__)
        """,
        str(venv.scratch / "acceptance.db"),
    )
    assert _ok(result).stdout.split() == ["ok", "harel_store_sqlite.sync"]


def test_jsondir_is_not_importable_through_harel_without_its_wheel(venv: Venv) -> None:
    result = venv.python("from harel.registry import open_store; open_store('jsondir:///x')")
    assert result.returncode != 0
    assert "jsondir" in result.stderr


def test_harel_conformance_passes_for_sqlite(venv: Venv) -> None:
    # the smoke subset: the whole kit runs in harel-store-sqlite's own tests
    url = f"sqlite:///{venv.scratch / 'w.db'}"
    result = _ok(venv.harel("conformance", url, "-q", "-x", "-m", "harel_smoke"))
    assert " passed" in result.stdout
    assert " failed" not in result.stdout
    assert " deselected" in result.stdout


def test_installing_and_uninstalling_the_example_store(venv: Venv) -> None:
    venv.pip("install", "--quiet", venv.wheel("harel-example-jsondir"))
    rows = venv.stores()
    assert set(rows) == {"memory", "sqlite", "jsondir"}
    assert rows["jsondir"]["status"] == "ok"
    assert rows["jsondir"]["distribution"] == "harel-example-jsondir"
    used = venv.python(
        """
        import sys
        from harel import Execution
        from harel.registry import open_store
        store = open_store("jsondir://" + sys.argv[1])
        store.save(Execution(id="x", definition_id="d"))
        print(type(store).__name__, store.load("x").version)
        """,
        str(venv.scratch / "jd"),
    )
    assert _ok(used).stdout.split() == ["JsonDirStore", "1"]

    venv.pip("uninstall", "--yes", "--quiet", "harel-example-jsondir")
    rows = venv.stores()
    assert set(rows) == {"memory", "sqlite"}
    table = _ok(venv.harel("stores"))
    assert "jsondir" not in table.stdout
    assert table.stderr == ""
    for word in ("error", "warning", "broken", "incompatible"):
        assert word not in table.stdout.lower(), table.stdout


def _fake_future_plugin(out_dir: Path) -> Path:
    """A wheel whose plugin needs harel-core>=9 and whose import would leave a marker file."""
    name, version = "harel_store_future", "1.0.0"
    dist_info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "",
        f"{name}/_plugin.py": textwrap.dedent(
            """
            import os
            from pathlib import Path
            Path(os.environ["HAREL_FUTURE_MARKER"]).write_text("imported")
            raise RuntimeError("harel-store-future must not be imported by harel-core 0.x")
            """
        ),
        f"{dist_info}/METADATA": textwrap.dedent(
            f"""\
            Metadata-Version: 2.1
            Name: harel-store-future
            Version: {version}
            Summary: A store plugin built for a future harel-core
            Requires-Dist: harel-core>=9
            """
        ),
        f"{dist_info}/WHEEL": textwrap.dedent(
            """\
            Wheel-Version: 1.0
            Generator: harel-tests
            Root-Is-Purelib: true
            Tag: py3-none-any
            """
        ),
        f"{dist_info}/entry_points.txt": f"[harel.stores]\nfuture = {name}._plugin\n",
    }
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for path, text in files.items():
        digest = hashlib.sha256(text.encode()).digest()
        encoded = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        writer.writerow([path, f"sha256={encoded}", len(text.encode())])
    writer.writerow([f"{dist_info}/RECORD", "", ""])
    wheel = out_dir / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{dist_info}/RECORD", record.getvalue())
    return wheel


def test_a_plugin_for_another_core_is_reported_incompatible_and_not_imported(
    venv: Venv,
) -> None:
    marker = venv.scratch / "future-imported"
    venv.env["HAREL_FUTURE_MARKER"] = str(marker)
    venv.pip("install", "--quiet", "--no-deps", _fake_future_plugin(venv.scratch))
    try:
        rows = venv.stores()
        future = [row for row in rows.values() if row["distribution"] == "harel-store-future"]
        assert len(future) == 1, rows
        assert future[0]["status"] == "incompatible"
        assert "harel-core>=9" in str(future[0]["error"])
        assert rows["sqlite"]["status"] == "ok"  # one bad plugin never breaks the others
        assert not marker.exists(), "the incompatible plugin was imported"
        table = _ok(venv.harel("stores"))
        assert "incompatible" in table.stdout
        still_works = venv.python(
            "from harel.registry import open_store; open_store('memory://').close(); print('ok')"
        )
        assert _ok(still_works).stdout.strip() == "ok"
        assert not marker.exists()
    finally:
        venv.pip("uninstall", "--yes", "--quiet", "harel-store-future")
        del venv.env["HAREL_FUTURE_MARKER"]
    assert set(venv.stores()) == {"memory", "sqlite"}
