"""``run_conformance``: the kit against a store URL, from Python or the ``harel`` CLI.

Secrets: the URL is validated before pytest starts (:func:`check_url`), handed to pytest
inside the process (a plugin object puts a :class:`~harel.conformance.urls.SecretURL` in the
config stash; it never appears on a command line, in a test id or as a plain string in a
fixture's locals), and every failure report of the run is scrubbed of the URL's secrets.

Test ids are stable and readable (``_url_suite.py::TestStoreConformance::test_...[sync]``):
the suite's own folder is the rootdir.  pytest's cache and hypothesis' example database live
in :func:`kit_cache_dir` (one folder per store URL, keyed by its redacted form), so ``--lf``
and ``--ff`` work across runs and nothing is written to the current directory.  Shrinking is
off unless ``HAREL_KIT_SHRINK=1`` (then bounded; :func:`harel.conformance.profiles.url_mode`)
and the stateful test runs last, so a broken store fails about as fast as a correct one
passes.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from harel.conformance.urls import SecretURL


def url_suite_path() -> Path:
    """The bundled suite module's file (collected by path)."""
    return Path(__file__).with_name("_url_suite.py")


CACHE_VAR = "HAREL_CACHE_DIR"
"""Where harel keeps caches (default ``$XDG_CACHE_HOME/harel``, else ``~/.cache/harel``)."""


def kit_cache_dir(url: str) -> Path | None:
    """The kit's cache folder for ``url`` (pytest's cache, hypothesis' examples), created;
    ``None`` when it cannot be created.  The folder name is a hash of the redacted URL, so
    no secret reaches the file system."""
    from harel.store.common.urls import redact_url

    configured = os.environ.get(CACHE_VAR) or ""
    if configured:
        base = Path(configured)
    elif os.environ.get("XDG_CACHE_HOME"):
        base = Path(os.environ["XDG_CACHE_HOME"], "harel")
    else:
        base = Path.home() / ".cache" / "harel"
    key = hashlib.sha256(redact_url(url).encode("utf-8")).hexdigest()[:16]
    folder = base / "conformance" / key
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder


def _shrinking() -> bool:
    from harel.conformance.profiles import SHRINK_VAR

    return os.environ.get(SHRINK_VAR, "").strip().lower() in {"1", "true", "yes", "on"}


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
    current directory (``-c`` a file of its own, rootdir the suite's folder, the cache in
    :func:`kit_cache_dir`), so it runs from anywhere and writes nothing there.  Extra
    ``pytest_args`` (e.g. ``["--harel-strict", "-x", "-k", "Timer"]``, ``["--lf"]``,
    ``["-m", "harel_smoke"]``) are appended.
    """
    if not isinstance(url, str) or not url:
        raise ValueError("run_conformance needs a store URL such as 'sqlite:///tmp/kit.db'")
    if not checked:
        check_url(url)
    from hypothesis.configuration import set_hypothesis_home_dir

    from harel.conformance.profiles import url_mode

    suite = url_suite_path()
    with tempfile.TemporaryDirectory(prefix="harel-conformance-") as scratch:
        cache = kit_cache_dir(url) or Path(scratch)
        inifile = Path(scratch, "pytest.ini")
        inifile.write_text(f"[pytest]\ncache_dir = {cache / 'pytest'}\n", encoding="utf-8")
        args = [
            str(suite),
            "-c",
            str(inifile),
            "--rootdir",
            str(suite.parent),
            "--confcutdir",
            str(suite.parent),
            # plugins imported before the session (anyio, via harel) cannot be rewritten
            "-W",
            "ignore:Module already imported so cannot be rewritten"
            ":pytest.PytestAssertRewriteWarning",
            "-p",
            "harel.conformance.plugin",
            *pytest_args,
        ]
        set_hypothesis_home_dir(cache / "hypothesis")
        try:
            with url_mode(cache / "hypothesis" / "examples", shrink=_shrinking()):
                return int(pytest.main(args, plugins=[_StoreURLPlugin(SecretURL(url))]))
        finally:
            set_hypothesis_home_dir(None)
