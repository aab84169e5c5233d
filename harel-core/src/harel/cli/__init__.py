"""The ``harel`` command: argparse subcommands contributed by the modules in COMMAND_MODULES.

Every command module exposes ``register(subparsers) -> None``, which adds its parser and
sets ``handler=<callable(args) -> int>`` as a default.  Errors become one line on stderr
(secrets redacted, no exception type names; a DSL error keeps its caret lines) and exit
status 2; never a traceback.  Warnings (e.g. a broken store plugin) print as
``harel: warning: ...`` without a Python source line.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harel.store.contract import ExecutionStore

COMMAND_MODULES: list[str] = [
    "harel.cli.stores",
    "harel.cli.conformance_cmd",
    "harel.cli.engine_cmds",
    "harel.cli.purge",
    "harel.cli.migrate_cmd",
]
"""Modules that contribute subcommands (append yours: a one-line edit)."""

EXIT_USAGE = 2
EXIT_NOTHING_HAPPENED = 1
"""``harel send``: the event was not applied (finished execution); the notice says why."""


NO_STORE = (
    "no store is configured: pass --store URL or set STM_STORE_URL "
    "(e.g. --store sqlite:///app.db); `harel stores` lists the installed backends"
)


class CommandError(Exception):
    """A user-facing failure of a command: printed as one line, exit status 2."""


@contextlib.contextmanager
def open_cli_store(url: str | None, *, fallback: str | None = None) -> Iterator[ExecutionStore]:
    """The store of a command: ``--store URL``, else the environment (``store_from_env``), else
    ``fallback`` when no ``STM_STORE*`` variable is set; closed on exit.  With nothing
    configured the error asks for ``--store URL`` first."""
    from harel.registry import open_store, store_from_env
    from harel.registry._env import NoStoreConfigured

    if (
        url is None
        and fallback is not None
        and not any(k.startswith("STM_STORE") for k in os.environ)
    ):
        url = fallback
    if url is not None:
        store = open_store(url)
    else:
        try:
            store = store_from_env()
        except NoStoreConfigured:
            raise CommandError(NO_STORE) from None
    try:
        yield store
    finally:
        store.close()


def scrub(text: str) -> str:
    """``text`` with every URL's secrets and ``password=``-like values replaced by ``***``."""
    from harel.store.common.urls import redact_text

    return redact_text(text)


def _os_error_text(exc: OSError) -> str:
    reason = (exc.strerror or str(exc) or "cannot access the file").rstrip(".")
    if exc.filename is not None:
        return f"{reason[:1].lower()}{reason[1:]}: {str(exc.filename)!r}"
    return reason


def _message(exc: BaseException) -> str:
    """What the user reads: the message only (no exception type names), secrets redacted;
    one line, except a DSL error, which keeps the offending line and its caret."""
    from harel.engine.dsl import DslError

    if isinstance(exc, DslError):
        return scrub(str(exc).rstrip())
    if isinstance(exc, OSError) and (exc.strerror or exc.filename is not None):
        text = _os_error_text(exc)
    else:
        text = str(exc)
    if not text:
        text = f"unexpected {type(exc).__name__} (no message)"
    return scrub(" ".join(text.split()))


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: object = None,
    line: str | None = None,
) -> None:
    text = " ".join(str(message).split()).removeprefix("harel: ")
    print(f"harel: warning: {scrub(text)}", file=sys.stderr)


@contextlib.contextmanager
def cli_warnings() -> Iterator[None]:
    """Print warnings as ``harel: warning: ...`` lines (no file, line number or source)."""
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        yield


def build_parser() -> argparse.ArgumentParser:
    """The ``harel`` parser with every importable command module registered."""
    from harel.registry import core_version

    parser = argparse.ArgumentParser(
        prog="harel",
        description="harel: durable statecharts with pluggable stores.",
    )
    parser.add_argument("--version", action="version", version=f"harel-core {core_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
            module.register(subparsers)
        except Exception as exc:
            print(
                f"harel: warning: command module {module_name} is unavailable: {_message(exc)}",
                file=sys.stderr,
            )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``harel`` command with ``argv`` (default: ``sys.argv[1:]``); the exit status."""
    with cli_warnings():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:
        return _exit_code(exc)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_usage(sys.stderr)
        print("harel: error: choose a command (harel --help lists them)", file=sys.stderr)
        return EXIT_USAGE
    try:
        return int(handler(args))
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:
        return _exit_code(exc)
    except Exception as exc:
        print(f"harel: error: {_message(exc)}", file=sys.stderr)
        return EXIT_USAGE


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(scrub(str(code)), file=sys.stderr)
    return 1
