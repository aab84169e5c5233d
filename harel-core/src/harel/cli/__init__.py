"""The ``harel`` command: argparse subcommands contributed by the modules in COMMAND_MODULES.

Every command module exposes ``register(subparsers) -> None``, which adds its parser and
sets ``handler=<callable(args) -> int>`` as a default.  Errors become one line on stderr
(secrets redacted, no exception type names; a DSL error keeps its caret lines) and exit
status 2; never a traceback, also not for Ctrl-C (``harel: interrupted``, exit 130) or a
closed pipe (``harel list | head``: silent, exit 141).  Warnings (e.g. a broken store
plugin) print as ``harel: warning: ...`` without a Python source line.  While a store's
server is unreachable every retry prints ``harel: waiting for URL — attempt 2 of 3 ...``
(redacted) on stderr; interactive commands retry at most :data:`INTERACTIVE_RETRIES` times
unless the URL sets ``connect_retries``, ``harel worker`` keeps the backend's default.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harel.store.contract import ExecutionStore

COMMAND_MODULES: list[str] = [
    "harel.cli.stores",
    "harel.cli.conformance_cmd",
    "harel.cli.engine_cmds",
    "harel.cli.purge",
    "harel.cli.migrate_cmd",
    "harel.cli.monitor_cmd",
]
"""Modules that contribute subcommands (append yours: a one-line edit)."""

EXIT_USAGE = 2
EXIT_NOTHING_HAPPENED = 1
"""``harel send``: the event was not applied (finished execution); the notice says why."""
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
"""The reader of stdout went away (``harel list | head -2``): nothing more is printed."""
INTERACTIVE_RETRIES = 2
"""Connection retries of the interactive commands (a worker keeps the backend's default)."""


NO_STORE = (
    "no store is configured: pass --store URL or set STM_STORE_URL "
    "(e.g. --store sqlite:///app.db); `harel stores` lists the installed backends"
)


class CommandError(Exception):
    """A user-facing failure of a command: printed as one line, exit status 2."""


def cli_store_url(url: str | None, *, fallback: str | None = None) -> str:
    """The store URL of a command: ``url`` (``--store``), else the environment's, else
    ``fallback`` when no ``STM_STORE*`` variable is set; CommandError when none."""
    from harel.registry import store_settings_from_env
    from harel.registry._env import NoStoreConfigured

    if url is not None:
        return url
    if fallback is not None and not any(k.startswith("STM_STORE") for k in os.environ):
        return fallback
    try:
        return store_settings_from_env().url
    except NoStoreConfigured:
        raise CommandError(NO_STORE) from None


def _print_wait(wait: Any) -> None:
    print(f"harel: {scrub(wait.describe())}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def reporting_waits(url: str, *, interactive: bool) -> Iterator[None]:
    """Within the block each retried connection attempt prints a ``harel: waiting for ...``
    line on stderr (the log record is not printed twice); ``interactive`` caps the retries at
    :data:`INTERACTIVE_RETRIES` unless ``url`` sets ``connect_retries``."""
    import logging

    from harel.store.common.retry import LOGGER, report_waits, retry_limit

    explicit = "connect_retries=" in url.partition("?")[2]
    limit = INTERACTIVE_RETRIES if interactive and not explicit else None
    quiet = logging.NullHandler()
    LOGGER.addHandler(quiet)
    try:
        with report_waits(_print_wait), retry_limit(limit):
            yield
    finally:
        LOGGER.removeHandler(quiet)


def open_url(url: str, *, create: bool = True, interactive: bool = True) -> ExecutionStore:
    """Open ``url`` for a command, saying on stderr while it waits for the server.

    ``create=False`` (read-only commands) opens existing storage only: StoreNotFound
    when there is none, and nothing is created."""
    from harel.registry import open_store

    with reporting_waits(url, interactive=interactive):
        return open_store(url, create=create)


@contextlib.contextmanager
def open_cli_store(
    url: str | None,
    *,
    fallback: str | None = None,
    create: bool = True,
    interactive: bool = True,
) -> Iterator[ExecutionStore]:
    """The store of a command: ``--store URL``, else the environment, else ``fallback`` when
    no ``STM_STORE*`` variable is set; closed on exit.  With nothing configured the error
    asks for ``--store URL`` first.  ``create=False``: existing storage only (see
    :func:`open_url`); ``interactive=False`` keeps the backend's connection retries."""
    store = open_url(cli_store_url(url, fallback=fallback), create=create, interactive=interactive)
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


_ACTIONS_HINT = "bind them with --actions MODULE "
"""The CLI's words for the DSL's ``pass them in actions=`` (the Python API's keyword)."""


def _message(exc: BaseException) -> str:
    """What the user reads: the message only (no exception type names), secrets redacted;
    one line, except a DSL error, which keeps the offending line and its caret."""
    from harel.engine.dsl import DslError

    if isinstance(exc, DslError):
        text = str(exc).rstrip().replace("pass them in actions= ", _ACTIONS_HINT)
        return scrub(text)
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
    """Run the ``harel`` command with ``argv`` (default: ``sys.argv[1:]``); the exit status.

    Never raises: Ctrl-C at any point is ``harel: interrupted`` (130), a closed stdout pipe
    ends the command silently (141)."""
    try:
        with cli_warnings():
            code = _main(argv)
        sys.stdout.flush()
    except KeyboardInterrupt:
        print("harel: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (a test's capture): nothing to flush
        pass


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
    except (KeyboardInterrupt, BrokenPipeError):
        raise
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
