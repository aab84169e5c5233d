"""Verification: every source record compared with the destination's, record by record."""

from __future__ import annotations

from harel.migrate._checks import require_records
from harel.migrate._compare import as_destination_keeps, differing_sets
from harel.migrate._ids import PAGE, listed_ids, source_ids
from harel.migrate._progress import Progress, ProgressCallback
from harel.migrate._report import Difference, VerifyReport
from harel.store.contract import ExecutionStore


def verify(
    src: ExecutionStore,
    dst: ExecutionStore,
    *,
    page: int = PAGE,
    progress: ProgressCallback | None = None,
) -> VerifyReport:
    """Compare what ``src`` holds with what ``dst`` holds, id by id; writes nothing.

    Every id the source holds something for (listed executions and ids only pending relays
    target) must be in the destination with the same record digest (the trace cut to the
    destination's ``trace_max``); each one that is not is a :class:`Difference` naming the
    sets (execution, marks, timers, relays, trace) that differ.  The report also carries the
    per-kind counts of both sides and how many executions only the destination lists.
    """
    require_records(src, "source")
    require_records(dst, "destination")
    ids = source_ids(src, page=page)
    report = VerifyReport(untargeted_outbox=ids.untargeted_outbox)
    for done, execution_id in enumerate(ids.ids, start=1):
        record = src.export_execution(execution_id)
        found = dst.export_execution(execution_id)
        if found is not None:
            report.destination.add(found)
        if record is None:
            report.differences.append(Difference(execution_id, ("vanished",)))
        else:
            wanted = as_destination_keeps(record, dst.trace_max)
            report.source.add(wanted)
            sets = differing_sets(wanted, found)
            if sets:
                report.differences.append(Difference(execution_id, sets))
        report.checked += 1
        if progress is not None:
            progress(Progress("verify", done, len(ids.ids)))
    known = set(ids.ids)
    report.only_in_destination = sum(1 for key in listed_ids(dst, page=page) if key not in known)
    return report
