"""``run_conformance``: the kit against a store URL, from Python or the ``harel`` CLI.

Secrets: the URL is validated before pytest starts (:func:`check_url`), handed to pytest
inside the process (a plugin object puts a :class:`~harel.conformance.urls.SecretURL` in the
config stash; it never appears on a command line, in a test id or as a plain string in a
fixture's locals), and every failure report of the run is scrubbed of the URL's secrets.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from harel.conformance.urls import SecretURL


def url_suite_path() -> Path:
    """The bundled suite module's file (collected by path)."""
    return Path(__file__).with_name("_url_suite.py")


def check_url(url: str) -> None:
    """Validate ``url`` for the kit before any test runs: well formed, its backend installed
    and usable, shipping a harness that builds (and is destroyed again) over it.

    Raises the registry's typed errors (InvalidStoreURL, UnknownScheme, BackendUnavailable,
    HarnessUnavailable); a harness that fails to build raises InvalidStoreURL.  Messages are
    redacted and chain no exception that could echo the URL.
    """
    from harel.registry import backend_for_url, harness_for_url, harness_spec
    from harel.store.common.urls import redact_url, scrub_secrets, url_secrets
    from harel.store.errors import BackendError, InvalidStoreURL

    harness_spec(backend_for_url(url))
    problem: str | None = None
    with tempfile.TemporaryDirectory(prefix="harel-conformance-check-") as workdir:
        try:
            harness_for_url(url, workdir).destroy()
        except BackendError:
            raise
        except Exception as exc:
            problem = scrub_secrets(str(exc) or type(exc).__name__, url_secrets(url))
    if problem is not None:
        raise InvalidStoreURL(
            f"the conformance kit cannot use {redact_url(url)}: building its harness failed: "
            f"{problem}"
        )


class _StoreURLPlugin:
    """Hands the URL to the kit's pytest plugin through the config stash."""

    def __init__(self, url: SecretURL) -> None:
        self.url = url

    def pytest_configure(self, config: pytest.Config) -> None:
        from harel.conformance.plugin import STORE_URL

        config.stash[STORE_URL] = self.url


def run_conformance(url: str, pytest_args: Sequence[str] = (), *, checked: bool = False) -> int:
    """Run the whole kit against ``url``'s backend; returns pytest's exit code (0 = passed).

    The URL is validated first (:func:`check_url`; ``checked=True`` skips that when the
    caller just did).  The harness comes from ``harel.registry.harness_for_url(url,
    tmp_path)``, so the backend must ship one.  It ignores any pytest configuration of the
    current directory (``-c`` an empty file, rootdir a temporary directory, no cache), so it
    runs from anywhere.  Extra ``pytest_args`` (e.g. ``["--harel-strict", "-x", "-k",
    "Timer"]``) are appended.
    """
    if not isinstance(url, str) or not url:
        raise ValueError("run_conformance needs a store URL such as 'sqlite:///tmp/kit.db'")
    if not checked:
        check_url(url)
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
            *pytest_args,
        ]
        return int(pytest.main(args, plugins=[_StoreURLPlugin(SecretURL(url))]))
