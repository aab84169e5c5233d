"""Fixtures of the monitor's browser tests: Debian's chromium driven by Playwright, and
``harel monitor`` served for real (a subprocess on a free loopback port).

Without chromium the tests skip naming ``apt-get install chromium``; under ``CI=true`` they
fail instead (a missing browser never turns into a silent skip there).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from harel.conformance.urls import in_ci

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
"""Chromium switches for a quiet headless run: no sandbox (root in a container), no network
of its own (updates, sync, QUIC)."""

SCREENSHOTS = Path(__file__).resolve().parents[4] / "build" / "screenshots"
"""Where a run saves its screenshots (``build/`` is gitignored)."""

STARTUP_SECONDS = 60.0
"""How long the monitor may take to answer its first request before the fixture gives up."""


def _missing_browser(message: str) -> None:
    """Skip with ``message``; under ``CI=true`` fail with it."""
    if in_ci():
        pytest.fail(f"{message} (CI=true: the browser tests may not be skipped)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of Debian's chromium (skip, or fail under CI, when it is not installed)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        _missing_browser("the browser tests need chromium: apt-get install chromium")
    assert found is not None
    return found


@pytest.fixture(scope="module")
def browser(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """One headless chromium (a fresh profile, 1280x800 pages) for the module's tests.

    Module-scoped, not session-scoped: Playwright's sync API keeps an asyncio loop running
    on this thread while it is open, and the asyncio tests of later modules need the thread
    free."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing_browser("the browser tests need playwright: make install (the dev group)")
        raise
    with sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 800},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser: BrowserContext) -> Iterator[Page]:
    """A new tab per test (10 s for any wait), closed afterwards."""
    tab = browser.new_page()
    tab.set_default_timeout(10_000)
    try:
        yield tab
    finally:
        tab.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """The run's screenshot folder (``build/screenshots``), created when missing."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _harel_command() -> list[str]:
    """The ``harel`` console script of this interpreter (``python -m harel`` without one)."""
    script = shutil.which("harel", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "harel"]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


class MonitorProcess:
    """``harel monitor --store URL --definitions DIR --port N`` running as a child process
    (its output goes to ``log``); :meth:`wait_until_serving` returns once it answers."""

    def __init__(self, store_url: str, definitions: Path, log: Path) -> None:
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.log = log
        argv = [*_harel_command(), "monitor", "--store", store_url]
        argv += ["--definitions", str(definitions), "--port", str(port)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with log.open("wb") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)

    def wait_until_serving(self) -> str:
        """The base URL once the monitor answers; fails naming its output if it exits (or
        does not answer within :data:`STARTUP_SECONDS`)."""
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _answers(f"{self.base}/api/summary"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                output = self.log.read_text(encoding="utf-8", errors="replace")
                pytest.fail(f"harel monitor did not start (exit {self.process.poll()}):\n{output}")
            time.sleep(0.05)
        return self.base

    def stop(self) -> None:
        """Interrupt the monitor and reap it (killed if it does not stop within 15 s)."""
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextmanager
def serve_monitor(store_url: str, definitions: Path, log: Path) -> Iterator[MonitorProcess]:
    """A started :class:`MonitorProcess` (maybe not answering yet), stopped when the block
    ends."""
    monitor = MonitorProcess(store_url, definitions, log)
    try:
        yield monitor
    finally:
        monitor.stop()
