"""Which store URL a test run uses for a backend: an explicit variable, else a local one."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path


def url_variable_for(backend_name: str) -> str:
    """The environment variable that points tests at a backend, e.g. ``HAREL_TEST_POSTGRES_URL``."""
    return f"HAREL_TEST_{re.sub(r'[^A-Za-z0-9]', '_', backend_name).upper()}_URL"


def backend_test_url(
    backend_name: str, workdir: Path, environ: Mapping[str, str] | None = None
) -> str | None:
    """A URL for a throwaway store of that backend, or ``None`` when it needs a server.

    ``HAREL_TEST_<NAME>_URL`` wins; otherwise the backend's declared ``local_url`` template
    is filled with ``workdir`` (embedded backends: memory, SQLite, a directory store...),
    which is created when missing.
    """
    from harel.registry import get_backend

    env = os.environ if environ is None else environ
    explicit = env.get(url_variable_for(backend_name))
    if explicit:
        return explicit
    template = get_backend(backend_name).local_url
    if template is None:
        return None
    directory = Path(workdir).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    return template.replace("{workdir}", str(directory))


def in_ci(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this is a CI run (``CI`` set to 1/true/yes), where nothing may be skipped."""
    env = os.environ if environ is None else environ
    return env.get("CI", "").strip().lower() in {"1", "true", "yes"}


def backend_test_url_or_skip(backend_name: str, workdir: Path) -> str:
    """:func:`backend_test_url`, or skip the test naming the variable to set.

    Under ``CI=true`` a backend nobody pointed at a server FAILS the test instead: an
    unreachable server never turns into a silent skip there.
    """
    url = backend_test_url(backend_name, workdir)
    if url is not None:
        return url
    import pytest

    message = (
        f"store backend {backend_name!r} needs a server: "
        f"set {url_variable_for(backend_name)} to a URL the tests may use"
    )
    if in_ci():
        pytest.fail(f"{message} (CI=true: an unreachable backend fails the run)")
    pytest.skip(message)


def usable_backend_names(*, multi_process: bool = False) -> list[str]:
    """Installed backends with status ``ok`` (sorted): what an all-backends test runs over.

    ``multi_process=True`` keeps only those declaring that several processes may share
    their data.  Plugin warnings are silenced here: the registry's own tests report them.
    """
    import warnings

    from harel.registry import available_backends

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        infos = available_backends()
    return sorted(
        info.name
        for info in infos
        if info.status == "ok"
        and (
            not multi_process or (info.capabilities is not None and info.capabilities.multi_process)
        )
    )


class SecretURL:
    """A store URL that never shows its secrets: ``repr``/``str`` are redacted, so it may sit
    in pytest's stash, fixtures and traceback locals; :meth:`reveal` gives the URL itself."""

    __slots__ = ("_url",)

    def __init__(self, url: str) -> None:
        self._url = url

    def reveal(self) -> str:
        """The URL itself (pass it straight to the registry; never keep it in a local)."""
        return self._url

    def secrets(self) -> list[str]:
        """The URL's secret substrings, to scrub from any output."""
        from harel.store.common.urls import url_secrets

        return url_secrets(self._url)

    def __str__(self) -> str:
        from harel.store.common.urls import redact_url

        return redact_url(self._url)

    def __repr__(self) -> str:
        return f"SecretURL({str(self)!r})"
