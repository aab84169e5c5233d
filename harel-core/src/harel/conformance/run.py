"""``run_conformance``: the kit against a store URL, from Python or the ``harel`` CLI."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path


def url_suite_path() -> Path:
    """The bundled suite module's file (collected by path)."""
    return Path(__file__).with_name("_url_suite.py")


def run_conformance(url: str, pytest_args: Sequence[str] = ()) -> int:
    """Run the whole kit against ``url``'s backend; returns pytest's exit code (0 = passed).

    The harness comes from ``harel.registry.harness_for_url(url, tmp_path)``, so the backend
    must ship one.  It ignores any pytest configuration of the current directory
    (``-c`` an empty file, rootdir a temporary directory, no cache), so it runs from anywhere.
    Extra ``pytest_args`` (e.g. ``["--harel-strict", "-x", "-k", "Timer"]``) are appended.
    """
    import pytest

    if not isinstance(url, str) or not url:
        raise ValueError("run_conformance needs a store URL such as 'sqlite:///tmp/kit.db'")
    with tempfile.TemporaryDirectory(prefix="harel-conformance-") as rootdir:
        inifile = Path(rootdir, "pytest.ini")
        inifile.write_text("[pytest]\n", encoding="utf-8")
        args = [
            str(url_suite_path()),
            "-c",
            str(inifile),
            "--rootdir",
            rootdir,
            "-p",
            "no:cacheprovider",
            # plugins imported before the session (anyio, via harel) cannot be rewritten
            "-W",
            "ignore:Module already imported so cannot be rewritten"
            ":pytest.PytestAssertRewriteWarning",
            "-p",
            "harel.conformance.plugin",
            "--harel-store-url",
            url,
            *pytest_args,
        ]
        return int(pytest.main(args))
