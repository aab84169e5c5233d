"""Secrets fail closed (issue 7 §4): every output a secret-bearing URL can reach — API errors
and their chained causes, reprs, logs, CLI output, the conformance kit's output — is grepped
for both halves of the secret."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from harel import registry
from harel.cli import main
from harel.conformance.urls import SecretURL
from harel.registry._core import LOAD_VAR
from harel.store.common.retry import connect_with_retry
from harel.store.common.urls import parse_store_url, redact_text, redact_url, url_secrets

LEFT, RIGHT = "LEFTHALFzq", "RIGHTHALFzq"
"""Each secret is LEFT + a reserved character + RIGHT: neither half may ever be printed."""

URLS = [
    f"{scheme}://user:{LEFT}{char}{RIGHT}@host:5432/db"
    for scheme in ("ghost", "memory", "sqlite")
    for char in "/#?@:"
] + [
    f"user:{LEFT}{RIGHT}@host/db",  # no scheme: hidden entirely
    f"host=db password={LEFT}{RIGHT}",  # a libpq DSN is not a URL either
    f"sqlite:///x.db?password={LEFT}{RIGHT}",
    f"memory://x?token={LEFT}{RIGHT}",
    f"ghost://h/db?auth_token={LEFT}{RIGHT}&x=1",
    f"ghost://h/c?sv=1&sig={LEFT}{RIGHT}",
    f"ghost://h/c?api_key={LEFT}{RIGHT}",
    f"ghost://h/c?sas={LEFT}{RIGHT}",
    f"ghost://h/c?secret={LEFT}{RIGHT}#frag{LEFT}",
    f"ghost://{LEFT}{RIGHT}@host/db",  # a bare token as user name
]


def assert_clean(*texts: object) -> None:
    for text in texts:
        assert LEFT not in str(text) and RIGHT not in str(text), text


def full_report(error: BaseException) -> str:
    """What a log or a crash would show: the whole chained traceback."""
    return "".join(traceback.format_exception(error))


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith(("STM_", "HAREL_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv(LOAD_VAR, "memory,sqlite")
    registry.reset()
    yield
    registry.reset()


@pytest.mark.parametrize("url", URLS)
def test_redaction_helpers(url: str) -> None:
    assert_clean(redact_url(url), redact_text(f"failed on {url}: boom"), SecretURL(url))
    assert any(LEFT in secret or RIGHT in secret for secret in url_secrets(url))


@pytest.mark.parametrize("url", URLS)
def test_api_errors_and_their_chains(url: str, tmp_path: Path) -> None:
    calls = [
        lambda: parse_store_url(url),
        lambda: registry.open_store(url),
        lambda: registry.backend_for_url(url),
        lambda: registry.harness_for_url(url, tmp_path),
        lambda: registry.store_settings_from_env({"STM_STORE_URL": url}),
        lambda: registry.store_settings_from_env(
            {"STM_STORE_BACKEND": "sqlite", "STM_STORE_URL": url}
        ),
    ]
    for call in calls:
        try:
            result = call()
        except Exception as error:
            assert_clean(str(error), repr(error), full_report(error))
        else:
            assert_clean(repr(result), str(result))
            close = getattr(result, "close", None)
            if callable(close):
                close()


def test_reprs_of_parsed_urls_and_settings() -> None:
    url = f"memory://user:{LEFT}{RIGHT}@host/x?token={LEFT}"
    assert_clean(repr(parse_store_url(url)), str(parse_store_url(url)))
    settings = registry.StoreSettings("memory", url)
    assert_clean(repr(settings))


def test_connect_retry_errors_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    url = f"ghost://user:{LEFT}/{RIGHT}@host/db"

    def connect() -> None:
        raise ConnectionError(f"cannot connect to {url} (password={LEFT}{RIGHT})")

    with pytest.raises(Exception) as info, caplog.at_level(logging.DEBUG):
        connect_with_retry(connect, retries=1, delay=0.0, retry_on=(ConnectionError,), what=url)
        logging.getLogger("harel").error("failed: %s", info)
    assert_clean(str(info.value), full_report(info.value), caplog.text)
    assert info.value.__cause__ is None


@pytest.mark.parametrize("url", URLS)
def test_cli_output(url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for argv in (
        ["list", "--store", url],
        ["trace", "x", "--store", url],
        ["dead-letters", "--store", url],
        ["conformance", url, "--", "--collect-only", "-q"],
    ):
        main(argv)
        out, err = capsys.readouterr()
        assert_clean(out, err)


def test_cli_output_with_the_url_in_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for url in URLS:
        monkeypatch.setenv("STM_STORE_URL", url)
        for argv in (["list"], ["stores"], ["worker", "--definitions", "/nonexistent", "--once"]):
            main(argv)
            out, err = capsys.readouterr()
            assert_clean(out, err)


def test_kit_output_is_scrubbed(pytester: pytest.Pytester) -> None:
    url = f"memory://user:{LEFT}@host/x"
    pytester.makepyfile(
        test_leaky=f"""
        import logging

        def test_assert_shows_it():
            url = {url!r}
            print("stdout", url, {LEFT!r})
            logging.getLogger("x").error("log %s", url)
            assert url == ""

        def test_raises_with_it():
            raise RuntimeError("boom " + {LEFT!r})
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "harel.conformance.plugin", "--harel-store-url", url, "-l", "-rA"
    )
    text = result.stdout.str() + result.stderr.str()
    assert "2 failed" in text and "harel store: memory://user:***@host/x" in text
    assert LEFT not in text


@pytest.mark.slow
def test_harel_conformance_output_holds_no_secret(tmp_path: Path) -> None:
    url = f"memory://user:{LEFT}@host/x"
    command = [sys.executable, "-m", "harel.cli", "conformance", url]
    result = subprocess.run(
        [*command, "--", "-x", "-v", "-k", "commit"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert_clean(result.stdout, result.stderr)
    assert "harel store: memory://user:***@host/x" in result.stdout
