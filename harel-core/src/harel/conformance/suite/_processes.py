"""Other interpreters for the kit: the capability checks and the plugin-import check.

The store URL travels in an environment variable (never on a command line, in a test id or in
a message), and every child is the same Python as the test run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from typing import Any

import pytest

from harel.conformance._remote import URL_VAR
from harel.conformance.harness import StoreHarness
from harel.registry import StoreBackend

TIMEOUT = 120.0


def require_url(harness: StoreHarness, flag: str) -> None:
    """Fail unless a harness declaring capability ``flag`` names a URL for other processes."""
    if harness.url() is None:
        pytest.fail(
            f"{type(harness).__name__} declares {flag}=True but its url() is None: return a URL "
            "that a fresh interpreter can open over the same dataset (the kit verifies the "
            f"claim through it), or declare {flag}=False",
            pytrace=False,
        )


def _env(harness: StoreHarness) -> dict[str, str]:
    env = dict(os.environ)
    env[URL_VAR] = harness.url() or ""
    return env


def _tail(text: str, size: int = 3000) -> str:
    return text[-size:].strip()


def run_remote(harness: StoreHarness, *args: str) -> Any:
    """Run ``python -m harel.conformance._remote ARGS`` over the harness's URL; its JSON answer."""
    result = subprocess.run(
        [sys.executable, "-m", "harel.conformance._remote", *args],
        env=_env(harness),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, (
        f"the other interpreter ({args[0]}) failed with exit status {result.returncode}:\n"
        f"{_tail(result.stderr)}"
    )
    return json.loads(result.stdout.splitlines()[-1])


@dataclass
class Racer:
    """A child process that races commits once told ``go``."""

    name: str
    process: subprocess.Popen[str]

    def wait_ready(self) -> None:
        """Block until the child has opened its store and waits for the start signal."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if line != "ready":
            _, err = self.process.communicate(timeout=TIMEOUT)
            pytest.fail(f"racer {self.name} did not start ({line!r}):\n{_tail(err)}")

    def go(self) -> None:
        """Start the race."""
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def result(self) -> Any:
        """Wait for the child; what it reports (the versions it won, its lost rounds)."""
        out, err = self.process.communicate(timeout=TIMEOUT)
        assert self.process.returncode == 0, (
            f"racer {self.name} failed with exit status {self.process.returncode}:\n{_tail(err)}"
        )
        return json.loads(out.splitlines()[-1])


def start_racer(
    harness: StoreHarness, execution_id: str, name: str, commits: int, flavour: str
) -> Racer:
    """A child that will commit ``commits`` steps to ``execution_id`` through ``flavour``."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harel.conformance._remote",
            "race",
            execution_id,
            name,
            str(commits),
            flavour,
        ],
        env=_env(harness),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return Racer(name, process)


# -- which backend a harness belongs to ------------------------------------------------------


def import_string(cls: type) -> str:
    """``"module:QualName"`` of a class (the form a StoreBackend names its stores in)."""
    return f"{cls.__module__}:{cls.__qualname__}"


def registered_backend(harness: StoreHarness) -> tuple[StoreBackend, str] | None:
    """The installed backend whose sync store class the harness opens, and the module its
    entry point names; ``None`` when no entry point registers that class."""
    import warnings

    from harel.registry import available_backends

    store = harness.open_sync()
    try:
        classes = [import_string(klass) for klass in type(store).__mro__]
    finally:
        store.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        infos = available_backends()
    for target in classes:  # the store class itself, else the registered class it extends
        for info in infos:
            backend = info.backend
            if info.status != "ok" or backend is None or backend.store != target:
                continue
            if info.entry_point and " = " in info.entry_point:
                return backend, info.entry_point.split(" = ", 1)[1].strip()
    return None


_IMPORT_PROBE = textwrap.dedent(
    """
    import importlib, json, sys
    module_name, _, attr = sys.argv[1].partition(":")
    plugin = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        plugin = getattr(plugin, part)
    registered = []
    plugin.harel_register_stores(register=registered.append)
    print(json.dumps({"modules": sorted(sys.modules), "names": [b.name for b in registered]}))
    """
)


def plugin_problems(backend: StoreBackend, entry_point_value: str) -> list[str]:
    """What is wrong with importing the plugin module (and running its hook) in a fresh
    interpreter: it must register ``backend`` and load neither the engine nor a store module
    named by ``backend.store`` / ``backend.async_store``."""
    answer = plugin_import_footprint(entry_point_value)
    problems = []
    if backend.name not in answer["names"]:
        problems.append(f"its hook registered {answer['names']}, not {backend.name!r}")
    forbidden = {"harel.engine"} | {
        spec.partition(":")[0] for spec in (backend.store, backend.async_store)
    }
    loaded = sorted(forbidden & set(answer["modules"]))
    if loaded:
        problems.append(
            f"importing {entry_point_value} loads {loaded}: a plugin module may import only "
            "harel.registry, the capabilities and the descriptor; import drivers and stores "
            "lazily (the registry does, through the StoreBackend import strings)"
        )
    return problems


def plugin_import_footprint(entry_point_value: str) -> dict[str, Any]:
    """Import a plugin module (and run its hook) in a fresh interpreter; the modules loaded."""
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE, entry_point_value],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, (
        f"importing the plugin {entry_point_value!r} failed:\n{_tail(result.stderr)}"
    )
    answer: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return answer
