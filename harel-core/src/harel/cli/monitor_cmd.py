"""``harel monitor``: serve a local web view of a store (the ``harel-core[monitor]`` extra).

Safe by default: binds 127.0.0.1; any other address needs an access token (``--token`` or
``HAREL_MONITOR_TOKEN``); read-only unless ``--allow-writes``; the store URL is only ever
shown redacted.  The extra is imported when the command runs, so ``harel`` works without it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path
from typing import Any

from harel.cli import CommandError, cli_store_url, open_cli_store
from harel.monitor import INSTALL_HINT
from harel.monitor.settings import DEFAULT_HOST, DEFAULT_PORT, TOKEN_ENV

EXTRA_MODULES = ("starlette", "uvicorn", "jinja2", "multipart")
"""What ``harel-core[monitor]`` installs (``multipart`` is python-multipart: form posts)."""


def register(subparsers: Any) -> None:
    """Add the ``monitor`` subcommand."""
    parser = subparsers.add_parser(
        "monitor",
        help="serve a local web monitor of a store (pip install 'harel-core[monitor]')",
        description=(
            "Serve web pages of a store: executions page by page, one execution with its "
            "timers, pending work and timeline, the dead letters, the workers' leases; pages "
            "follow changes live. "
            "Read-only unless --allow-writes; a non-loopback --host needs --token."
        ),
    )
    parser.add_argument("--store", help="store URL (default: STM_STORE_URL)")
    parser.add_argument(
        "--definitions", type=Path, help="directory of .stm files (charts, the send form)"
    )
    parser.add_argument("--actions", help="module whose functions bind bare action names")
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"bind address ({DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port ({DEFAULT_PORT})")
    parser.add_argument(
        "--token", help=f"access token every request must carry (default: ${TOKEN_ENV})"
    )
    parser.add_argument(
        "--allow-writes",
        action="store_true",
        help="allow sending events, purging finished executions and requeueing dead letters "
        "(each confirmed)",
    )
    parser.set_defaults(handler=cmd_monitor)


def missing_extra() -> list[str]:
    """The modules of the monitor's extra that cannot be imported."""
    missing = []
    for name in EXTRA_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a module set to None in sys.modules
            found = False
        if not found:
            missing.append(name)
    return missing


def cmd_monitor(args: argparse.Namespace) -> int:
    """Check the extra, the bind rule and the store, then serve until Ctrl-C."""
    from harel.cli.engine_cmds import _config, _definitions
    from harel.monitor.settings import MonitorSettings, MonitorSetupError, check_bind
    from harel.store.common.urls import redact_url

    missing = missing_extra()
    if missing:
        raise CommandError(
            f"harel monitor needs its extra ({', '.join(missing)} missing): {INSTALL_HINT}"
        )
    if not 0 <= args.port <= 65535:
        raise CommandError(f"--port must be between 0 and 65535, got {args.port}")
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV)
    try:
        check_bind(args.host, token)
    except MonitorSetupError as err:
        raise CommandError(str(err)) from None
    config = _config()
    has_definitions = args.definitions is not None or config.definitions_dir is not None
    definitions = _definitions(args, config) if has_definitions else {}
    label = redact_url(cli_store_url(args.store))
    settings = MonitorSettings(
        store_label=label,
        token=token,
        allow_writes=args.allow_writes,
        definitions=definitions,
        definitions_where=repr(str(args.definitions or config.definitions_dir)),
        config=config,
    )
    from harel.monitor.server import serve

    with open_cli_store(args.store, create=False) as store:
        mode = "writes allowed" if args.allow_writes else "read-only"
        gate = ", access token required" if token else ""
        print(f"harel monitor: {label} ({mode}{gate})", flush=True)
        print(
            f"harel monitor: serving on http://{args.host}:{args.port}/ (Ctrl-C stops)", flush=True
        )
        serve(store, settings, host=args.host, port=args.port)
    return 0
