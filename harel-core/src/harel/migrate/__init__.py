"""``harel migrate``: move every execution from one store to another, any backend to any other.

Library use (the ``harel migrate SRC_URL DST_URL`` command is a thin layer over this)::

    from harel.migrate import migrate, verify
    from harel.registry import open_store

    src, dst = open_store("sqlite:///app.db"), open_store("postgresql://db/app?schema=harel")
    report = migrate(src, dst)       # copies, then verifies record by record
    print(report.summary())
    report.check()                   # raises MigrationConflict / VerificationFailed

What it guarantees, using only the store contract:

* every id the source holds something for is found: ``list_executions`` pages (all
  statuses, children included) plus the ids that only pending outbox entries target;
  untargeted outbox entries are counted and reported, not moved (the runner drops them);
* each record goes over whole or not at all (``export_execution`` → ``import_execution``);
* a record the destination already holds with the same digest (``record_digest``, after
  cutting the trace to the destination's ``trace_max``) is skipped: a run killed midway is
  resumed by running it again, and nothing is written twice;
* a destination record with different content is never overwritten: its id is refused and
  listed (``MigrationReport.conflicts``, exit status 1 on the command line);
* the run ends with :func:`verify`, which compares every record (digest, then set by set:
  execution, dedupe marks, timers, outbox, spawns, trace) and lists what differs.

Migration is offline: stop every worker and runner on the source first, and start them on
the destination only once the run (and its verification) succeeded.
"""

from harel.migrate._copy import migrate
from harel.migrate._ids import SourceIds, listed_ids, source_ids
from harel.migrate._progress import Progress, ProgressCallback, TerminalLine
from harel.migrate._report import (
    Counts,
    Difference,
    MigrationConflict,
    MigrationError,
    MigrationReport,
    VerificationFailed,
    VerifyReport,
)
from harel.migrate._verify import verify

__all__ = [
    "Counts",
    "Difference",
    "MigrationConflict",
    "MigrationError",
    "MigrationReport",
    "Progress",
    "ProgressCallback",
    "SourceIds",
    "TerminalLine",
    "VerificationFailed",
    "VerifyReport",
    "listed_ids",
    "migrate",
    "source_ids",
    "verify",
]
