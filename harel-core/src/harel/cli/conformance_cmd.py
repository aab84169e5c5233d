"""``harel conformance URL [PYTEST_ARGS...]``: run the conformance kit against a store URL."""

from __future__ import annotations

import argparse
from typing import Any

from harel.cli import CommandError


def register(subparsers: Any) -> None:
    """Add the ``conformance`` subcommand."""
    parser = subparsers.add_parser(
        "conformance",
        help="run the conformance kit against a store URL",
        description=(
            "Run harel's store conformance kit against an isolated, empty dataset derived "
            "from URL (e.g. sqlite:///kit.db, memory://). Arguments after URL go to pytest."
        ),
    )
    parser.add_argument("url", metavar="URL", help="the store URL (its backend must be installed)")
    parser.add_argument(
        "pytest_args",
        metavar="PYTEST_ARGS",
        nargs=argparse.REMAINDER,
        help="extra pytest arguments (e.g. -x -k commit)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Check the URL's backend ships a harness, then return ``run_conformance``'s exit code."""
    from harel.registry import backend_for_url, harness_spec

    harness_spec(backend_for_url(args.url))
    pytest_args = list(args.pytest_args)
    if pytest_args[:1] == ["--"]:
        pytest_args = pytest_args[1:]
    try:
        from harel.conformance import run_conformance
    except ImportError as exc:
        missing = (exc.name or "").partition(".")[0]
        if missing in {"pytest", "_pytest", "hypothesis"}:
            raise CommandError(
                f"the conformance kit needs {missing.lstrip('_')}: "
                "pip install 'harel-core[conformance]'"
            ) from exc
        raise CommandError(f"the conformance kit is not available: {exc}") from exc
    return int(run_conformance(args.url, pytest_args))
