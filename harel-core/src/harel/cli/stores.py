"""``harel stores``: the installed store backends (no driver is imported unless ``--check``).

With ``HAREL_STRICT_PLUGINS=1`` a plugin problem still lists every backend (table or
``--json``), then reports the problem on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

_COLUMNS = ("NAME", "DISTRIBUTION", "VERSION", "SCHEMES", "CAPABILITIES", "STATUS")
_FAILED_STATUSES = {"broken", "incompatible"}
EXIT_PROBLEM = 1


def register(subparsers: Any) -> None:
    """Add the ``stores`` subcommand."""
    parser = subparsers.add_parser(
        "stores",
        help="list the store backends",
        description=(
            "List the store backends: name, distribution, version, URL schemes, capabilities "
            "and status. Drivers are not imported unless --check is given."
        ),
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--check",
        action="store_true",
        help="import each backend's store classes and report (exit 1 if any is broken)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="also list first-party backends that are not installed (with their pip line)",
    )
    parser.set_defaults(handler=run)


def _capabilities_text(row: Any) -> str:
    if row.capabilities is None:
        return "-"
    flags = [name for name, value in row.capabilities.as_dict().items() if value]
    return ",".join(flags) or "-"


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    return "\n".join(line.rstrip() for line in lines)


def run(args: argparse.Namespace) -> int:
    """List (and with ``--check`` import) the backends; 1 when ``--check`` finds a problem."""
    from harel.registry import check_backend

    infos, strict_error = _list(include_not_installed=args.all)
    checks: dict[int, list[str]] = {}
    if args.check:
        for index, info in enumerate(infos):
            if info.status == "ok" and info.backend is not None:
                checks[index] = check_backend(info.backend)
    failed = any(info.status in _FAILED_STATUSES for info in infos) or any(
        problems for problems in checks.values()
    )
    if args.json:
        payload: list[dict[str, Any]] = []
        for index, info in enumerate(infos):
            item = info.as_dict()
            if args.check:
                problems = checks.get(index)
                item["check"] = None if problems is None else ("failed" if problems else "ok")
                item["check_errors"] = problems or []
            payload.append(item)
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        header = [*_COLUMNS, "CHECK"] if args.check else list(_COLUMNS)
        table: list[list[str]] = [header]
        notes: list[str] = []
        for index, info in enumerate(infos):
            cells = [
                info.name,
                info.distribution,
                info.version or "-",
                ",".join(info.schemes) or "-",
                _capabilities_text(info),
                info.status,
            ]
            if info.error:
                notes.append(f"{info.name} ({info.distribution}): {info.error}")
            if args.check:
                problems = checks.get(index)
                cells.append("-" if problems is None else ("failed" if problems else "ok"))
                notes.extend(f"{info.name}: check failed: {problem}" for problem in problems or [])
            table.append(cells)
        if len(table) == 1:
            print("no store backends are installed (harel stores --all lists installable ones)")
        else:
            print(_table(table))
        if notes:
            print()
            for note in notes:
                print(note)
    if strict_error is not None:
        from harel.cli import scrub

        text = " ".join(str(strict_error).split())
        print(f"harel: error: {scrub(text)} (strict mode: HAREL_STRICT_PLUGINS)", file=sys.stderr)
        return EXIT_PROBLEM
    return EXIT_PROBLEM if args.check and failed else 0


def _list(*, include_not_installed: bool) -> tuple[list[Any], Exception | None]:
    """Every backend row; in strict mode also the plugin error strict discovery raised (the
    rows then come from a lenient discovery, so the listing is complete either way)."""
    from harel.registry import available_backends
    from harel.registry._core import STRICT_VAR, Registry
    from harel.store.errors import PluginError

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the table reports every problem itself
        try:
            return available_backends(include_not_installed=include_not_installed), None
        except PluginError as exc:
            lenient = Registry({**os.environ, STRICT_VAR: "0"})
            return lenient.available(include_not_installed=include_not_installed), exc
