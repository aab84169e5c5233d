"""``harel purge``: remove finished executions (and everything they own) from a store.

Two ways to choose what goes::

    harel purge --store URL --id ID [--id ID ...] [--force] [--dry-run]
    harel purge --store URL --status DONE [--status FAILED ...] --older-than 30d
                [--force] [--dry-run]

The second pages through ``list_executions(status=...)`` and takes the executions whose last
commit (``ExecutionSummary.updated_at``) is older than the given age; executions listed without
``updated_at`` (written by an older store) are skipped and counted.  ``purge`` refuses an
execution that has not finished (PENDING, RUNNING, SUSPENDED, CANCELLING) unless ``--force``.
``--dry-run`` lists what would go and changes nothing.  Exit status: 0 when every selected
execution was purged (or would be), 1 when an ``--id`` is not stored or an execution was
refused, 2 on errors.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from harel.cli import EXIT_NOTHING_HAPPENED, CommandError, open_cli_store
from harel.model import ExecutionSummary, Status
from harel.store.contract import FINISHED, ExecutionStore
from harel.store.errors import ExecutionActive

PAGE = 200
"""Summaries read per listing page."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_AGE = re.compile(r"(?:\d+(?:\.\d+)?[smhdw])+")
NO_STORE = (
    "no store is configured: pass --store URL or set STM_STORE_URL (e.g. --store sqlite:///app.db)"
)


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` (or combined, ``1d12h``) as seconds."""
    compact = text.strip().lower()
    if not _AGE.fullmatch(compact):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an age: use a number and a unit s, m, h, d or w (e.g. 30d, 12h)"
        )
    return sum(float(m.group(1)) * _UNITS[m.group(2)] for m in _PART.finditer(compact))


def _status(text: str) -> Status:
    try:
        return Status(text.strip().upper())
    except ValueError:
        choices = ", ".join(status.value for status in Status)
        raise argparse.ArgumentTypeError(f"{text!r} is not a status (one of {choices})") from None


def register(subparsers: Any) -> None:
    """Add the ``purge`` subcommand."""
    parser = subparsers.add_parser(
        "purge",
        help="remove finished executions and everything they own",
        description=(
            "Remove executions with their dedupe marks, timers, outbox entries targeted at "
            "them, spawn intents they wrote and trace: by --id, or by --status and "
            "--older-than (the age of the last commit). Unfinished executions need --force."
        ),
    )
    parser.add_argument("--store", metavar="URL", help="store URL (default: STM_STORE_URL)")
    parser.add_argument(
        "--id",
        dest="ids",
        action="append",
        default=[],
        metavar="ID",
        help="an execution to purge (repeatable)",
    )
    parser.add_argument(
        "--status",
        dest="statuses",
        action="append",
        default=[],
        type=_status,
        metavar="STATUS",
        help="with --older-than: only executions in this status (repeatable), e.g. DONE",
    )
    parser.add_argument(
        "--older-than",
        type=parse_age,
        metavar="AGE",
        help="with --status: last commit at least this long ago, e.g. 30d, 12h, 90m",
    )
    parser.add_argument("--force", action="store_true", help="also purge unfinished executions")
    parser.add_argument("--dry-run", action="store_true", help="only say what would be purged")
    parser.set_defaults(handler=run)


def _when(summary: ExecutionSummary) -> str:
    if summary.updated_at is None:
        return "never committed with a timestamp"
    moment = datetime.fromtimestamp(summary.updated_at, UTC)
    return f"last commit {moment.isoformat(timespec='seconds')}"


def aged(
    store: ExecutionStore, statuses: list[Status], cutoff: float
) -> Iterator[ExecutionSummary | None]:
    """Summaries in ``statuses`` whose last commit is before ``cutoff`` (``None`` for each one
    listed without ``updated_at``), paging through the listing with its keyset cursor."""
    cursor: str | None = None
    while True:
        page = store.list_executions(status=statuses, limit=PAGE, cursor=cursor)
        for summary in page.items:
            if summary.updated_at is None:
                yield None
            elif summary.updated_at < cutoff:
                yield summary
        cursor = page.next_cursor
        if cursor is None:
            return


class Report:
    """Counts and one line per execution (stdout), refusals and misses (stderr)."""

    def __init__(self, dry_run: bool) -> None:
        self.dry_run = dry_run
        self.purged = 0
        self.missed = 0
        self.undated = 0

    def purge(
        self, store: ExecutionStore, execution_id: str, status: Status, force: bool, detail: str
    ) -> None:
        """Purge (or, dry, judge) one execution and say what happened."""
        if not force and status not in FINISHED:
            self.refuse(execution_id, status.value)
            return
        if self.dry_run:
            print(f"would purge {execution_id} ({status.value}, {detail})")
            self.purged += 1
            return
        try:
            existed = store.purge(execution_id, force=force)
        except ExecutionActive as exc:  # it changed since it was read
            self.refuse(execution_id, exc.status)
            return
        if existed:
            print(f"purged {execution_id} ({status.value}, {detail})")
            self.purged += 1

    def refuse(self, execution_id: str, status: str) -> None:
        """An unfinished execution without ``--force``."""
        print(
            f"harel: refused: {execution_id} is {status}, not finished; --force purges it anyway",
            file=sys.stderr,
        )
        self.missed += 1

    def finish(self) -> int:
        """The summary line and the exit status."""
        verb = "would purge" if self.dry_run else "purged"
        line = f"{verb} {self.purged} execution(s)"
        if self.undated:
            line += f"; skipped {self.undated} listed without updated_at (age unknown)"
        print(line)
        return EXIT_NOTHING_HAPPENED if self.missed else 0


def run(args: argparse.Namespace) -> int:
    """Purge by id, or by status and age; see the module docstring."""
    by_age = bool(args.statuses) or args.older_than is not None
    if bool(args.ids) == by_age:
        raise CommandError(
            "choose what to purge: --id ID, or --status STATUS with --older-than AGE"
        )
    if by_age and (not args.statuses or args.older_than is None):
        raise CommandError(
            "--status and --older-than go together, e.g. --status DONE --older-than 30d"
        )
    report = Report(args.dry_run)
    with open_cli_store(args.store, create=False) as store:
        if args.ids:
            for execution_id in args.ids:
                exe = store.load(execution_id)
                if exe is None:
                    print(f"harel: not purged: {execution_id} is not stored", file=sys.stderr)
                    report.missed += 1
                    continue
                report.purge(store, execution_id, exe.status, args.force, f"version {exe.version}")
        else:
            cutoff = time.time() - args.older_than
            for summary in aged(store, args.statuses, cutoff):
                if summary is None:
                    report.undated += 1
                    continue
                report.purge(store, summary.id, summary.status, args.force, _when(summary))
    return report.finish()
