"""The ``harel`` command: argparse subcommands contributed by the modules in COMMAND_MODULES.

Every command module exposes ``register(subparsers) -> None``, which adds its parser and
sets ``handler=<callable(args) -> int>`` as a default.  Errors become one line on stderr
(passwords redacted) and exit status 2; never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable, Sequence

COMMAND_MODULES: list[str] = [
    "harel.cli.stores",
    "harel.cli.conformance_cmd",
    "harel.cli.engine_cmds",
]
"""Modules that contribute subcommands (append yours: a one-line edit)."""

EXIT_USAGE = 2

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


class CommandError(Exception):
    """A user-facing failure of a command: printed as one line, exit status 2."""


def scrub(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***``."""
    from harel.store.common.urls import redact_url

    return _URL.sub(lambda match: redact_url(match.group(0)), text)


def _message(exc: BaseException) -> str:
    from harel.store.errors import StoreError

    text = str(exc) or type(exc).__name__
    if not isinstance(exc, StoreError | CommandError):
        text = f"{type(exc).__name__}: {text}"
    return scrub(" ".join(text.split()))


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
