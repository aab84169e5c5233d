"""``harel conformance URL [PYTEST_ARGS...]``: run the conformance kit against a store URL.

The URL is validated (parsed, its backend found, its harness built once) before pytest
starts, and it reaches pytest only inside the process, never on a command line, in a test
id or in a traceback (see :func:`harel.conformance.run_conformance`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from harel.cli import EXIT_USAGE, CommandError

USAGE_HINT = (
    "harel conformance: error: a store URL is required, e.g. "
    "`harel conformance sqlite:///kit.db` or `harel conformance memory://`; "
    "arguments after the URL go to pytest (e.g. -x, -m harel_smoke, --lf)"
)


EPILOG = """\
the kit runs on pytest and hypothesis, which harel-core installs only with its
[conformance] extra:  pip install "harel-core[conformance]"

fast loops (arguments after URL go to pytest):
  harel conformance URL -m harel_smoke   a handful of tests, one per concern (seconds)
  harel conformance URL -x               stop at the first failure
  harel conformance URL --lf             rerun only the tests that failed last time
  harel conformance URL --ff             run last time's failures first, then the rest
  harel conformance URL -k Timer         only the tests whose id matches
  harel conformance URL --harel-strict   capability skips fail

Test ids read _url_suite.py::TestStoreConformance::test_...[sync|async]. The stateful
(random operations) test runs last and hypothesis failures are reported as found, not
shrunk (HAREL_KIT_SHRINK=1 shrinks them, bounded), so a broken store fails about as fast
as a correct one passes. pytest's cache (for --lf/--ff) and hypothesis' examples are kept
per store URL under $HAREL_CACHE_DIR (default ~/.cache/harel), never in the current
directory. HYPOTHESIS_PROFILE=thorough runs longer random tests.
"""


def register(subparsers: Any) -> None:
    """Add the ``conformance`` subcommand."""
    parser = subparsers.add_parser(
        "conformance",
        help="run the conformance kit against a store URL",
        description=(
            "Run harel's store conformance kit against an isolated, empty dataset derived "
            "from URL (e.g. sqlite:///kit.db, memory://). Arguments after URL go to pytest."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "url", metavar="URL", nargs="?", help="the store URL (its backend must be installed)"
    )
    parser.add_argument(
        "pytest_args",
        metavar="PYTEST_ARGS",
        nargs=argparse.REMAINDER,
        help="optional pytest arguments (e.g. -x -k commit)",
    )
    parser.set_defaults(handler=run, parser=parser)


def run(args: argparse.Namespace) -> int:
    """Validate the URL (backend, harness), then return ``run_conformance``'s exit code."""
    if not args.url:
        args.parser.print_usage(sys.stderr)
        print(USAGE_HINT, file=sys.stderr)
        return EXIT_USAGE
    pytest_args = list(args.pytest_args)
    if pytest_args[:1] == ["--"]:
        pytest_args = pytest_args[1:]
    try:
        from harel.conformance.run import check_url, run_conformance
    except ImportError as exc:
        missing = (exc.name or "").partition(".")[0]
        if missing in {"pytest", "_pytest", "hypothesis"}:
            raise CommandError(
                f"the conformance kit needs {missing.lstrip('_')}: "
                "pip install 'harel-core[conformance]'"
            ) from None
        raise CommandError(f"the conformance kit is not available: {exc}") from None
    check_url(args.url)
    return int(run_conformance(args.url, pytest_args, checked=True))
