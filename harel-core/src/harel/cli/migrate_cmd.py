"""``harel migrate SRC_URL DST_URL``: copy every execution to another store, then verify.

::

    harel migrate SRC_URL DST_URL [--dry-run | --verify-only | --no-verify]

Stop every worker on the source first: the migration is offline.  The source must exist
(a URL naming no store is an error; nothing is created there), and so must the destination
with ``--verify-only``.  Each execution record
(execution, dedupe marks, timers, relays, trace) is copied whole or not at all; one the
destination already holds identically is skipped, so a killed run is resumed by running the
same command again.  A destination record with other content is never overwritten.

Output: on a terminal, one updating progress line on stderr; always a summary on stdout, and
one stderr line per refused or differing id.  URLs are shown with their secrets redacted.
Exit status: 0 everything moved (or, dry, would move) and verified; 1 some ids refused
(conflicting or rejected by the destination); 3 the verification found differences; 2 errors.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from harel.cli import EXIT_NOTHING_HAPPENED, CommandError
from harel.migrate import MigrationReport, TerminalLine, VerifyReport, migrate, verify
from harel.store.common.urls import redact_url
from harel.store.contract import ExecutionStore

EXIT_REFUSED = EXIT_NOTHING_HAPPENED
"""Some ids were refused (conflicting, or rejected by the destination)."""
EXIT_DIFFERENT = 3
"""The verification found records that differ."""

DESCRIPTION = (
    "Copy every execution (with its dedupe marks, timers, pending relays and trace) from "
    "SRC_URL to DST_URL, any backend to any other, then verify record by record. STOP EVERY "
    "WORKER ON THE SOURCE FIRST: the migration is offline. Each record moves whole or not at "
    "all; records already in the destination with the same content are skipped, so an "
    "interrupted run is resumed by running the same command again. A destination record with "
    "different content is refused, never overwritten. Exit status: 0 done and verified, "
    "1 ids refused, 3 verification differences, 2 errors."
)


POSITIONALS = (
    ("source", "SRC_URL", "the store to copy from (read only)"),
    ("destination", "DST_URL", "the store to copy into"),
)
MODES = (
    ("--dry-run", "write nothing: count what would move and list the ids that conflict"),
    ("--verify-only", "copy nothing: only compare the source and the destination record by record"),
    ("--no-verify", "skip the final record-by-record comparison"),
)
"""The mutually exclusive mode flags and their help."""


def register(subparsers: Any) -> None:
    """Add the ``migrate`` subcommand."""
    summary = "copy every execution to another store (offline: stop the workers first)"
    parser = subparsers.add_parser("migrate", help=summary, description=DESCRIPTION)
    for name, metavar, text in POSITIONALS:
        parser.add_argument(name, metavar=metavar, help=text)
    mode = parser.add_mutually_exclusive_group()
    for flag, text in MODES:
        mode.add_argument(flag, action="store_true", help=text)
    parser.set_defaults(handler=run)


def _open(url: str, *, create: bool) -> ExecutionStore:
    from harel.cli import open_url

    return open_url(url, create=create)


def _say_verification(report: VerifyReport) -> int:
    for difference in report.differences:
        print(f"harel migrate: differs: {difference.describe()}", file=sys.stderr)
    print(report.summary())
    return 0 if report.ok else EXIT_DIFFERENT


def _say_migration(report: MigrationReport, where: str) -> int:
    verb = "would refuse" if report.dry_run else "refused"
    for execution_id in report.conflicts:
        print(
            f"harel migrate: {verb} {execution_id}: the destination holds different content "
            "(left as is)",
            file=sys.stderr,
        )
    for execution_id, reason in report.rejected.items():
        print(f"harel migrate: rejected {execution_id}: {reason}", file=sys.stderr)
    print(f"{report.summary()} ({where})")
    status = EXIT_REFUSED if report.conflicts or report.rejected else 0
    if report.verification is not None:
        verified = _say_verification(report.verification)
        status = status or verified
    return status


def run(args: argparse.Namespace) -> int:
    """Migrate, dry-run or verify; see the module docstring for the output and exit status."""
    if args.source == args.destination:
        raise CommandError("SRC_URL and DST_URL are the same store; name two different stores")
    where = f"{redact_url(args.source)} -> {redact_url(args.destination)}"
    line = TerminalLine(sys.stderr) if sys.stderr.isatty() else None
    src = _open(args.source, create=False)
    try:
        dst = _open(args.destination, create=not args.verify_only)
        try:
            if args.verify_only:
                result = verify(src, dst, progress=line)
                if line is not None:
                    line.close()
                return _say_verification(result)
            report = migrate(
                src, dst, dry_run=args.dry_run, check=not args.no_verify, progress=line
            )
            if line is not None:
                line.close()
            return _say_migration(report, where)
        finally:
            dst.close()
    finally:
        src.close()
