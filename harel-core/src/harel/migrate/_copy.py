"""The copy loop: every source record into the destination, whole or not at all, once."""

from __future__ import annotations

from harel.migrate._checks import require_records
from harel.migrate._compare import as_destination_keeps, same_record
from harel.migrate._ids import PAGE, source_ids
from harel.migrate._progress import Progress, ProgressCallback
from harel.migrate._report import MigrationReport
from harel.migrate._testing import hold_point
from harel.migrate._verify import verify
from harel.store.common.records import prepare_import
from harel.store.contract import ExecutionRecord, ExecutionStore
from harel.store.errors import ExecutionAlreadyExists


def _reject(report: MigrationReport, record: ExecutionRecord, error: Exception) -> str:
    report.rejected[record.execution_id] = " ".join(str(error).split())
    return "rejected"


def _import(dst: ExecutionStore, record: ExecutionRecord, report: MigrationReport) -> str:
    """Import one record; ``moved``, ``already`` (someone imported it meanwhile), ``conflict``
    or ``rejected`` (the reason is in ``report.rejected``)."""
    try:
        dst.import_execution(record)
    except ExecutionAlreadyExists:
        found = dst.export_execution(record.execution_id)
        wanted = as_destination_keeps(record, dst.trace_max)
        return "already" if found is not None and same_record(wanted, found) else "conflict"
    except (ValueError, TypeError) as exc:  # the destination cannot hold this record as is
        return _reject(report, record, exc)
    return "moved"


def _check(dst: ExecutionStore, record: ExecutionRecord, report: MigrationReport) -> str:
    """A dry run's import: validate the record as any store would (``moved`` or
    ``rejected``), writing nothing.  The destination's own size limits are not known here."""
    try:
        prepare_import(record, trace_max=dst.trace_max)
    except (ValueError, TypeError) as exc:
        return _reject(report, record, exc)
    return "moved"


def _step(
    src: ExecutionStore, dst: ExecutionStore, execution_id: str, report: MigrationReport
) -> None:
    record = src.export_execution(execution_id)
    if record is None or record.is_empty:
        report.vanished.append(execution_id)
        return
    wanted = as_destination_keeps(record, dst.trace_max)
    found = dst.export_execution(execution_id)
    if found is not None:
        outcome = "already" if same_record(wanted, found) else "conflict"
    elif report.dry_run:
        outcome = _check(dst, record, report)
    else:
        outcome = _import(dst, record, report)
    if outcome == "moved":
        report.moved.add(wanted)
        report.moved_ids.append(execution_id)
        if not report.dry_run:
            hold_point(len(report.moved_ids))
    elif outcome == "already":
        report.already_there.append(execution_id)
    elif outcome == "conflict":
        report.conflicts.append(execution_id)


def migrate(
    src: ExecutionStore,
    dst: ExecutionStore,
    *,
    dry_run: bool = False,
    check: bool = True,
    page: int = PAGE,
    progress: ProgressCallback | None = None,
) -> MigrationReport:
    """Copy every execution record of ``src`` into ``dst`` through the store contract.

    Guarantees: each record is written whole or not at all (one ``import_execution``); a
    record the destination already holds with the same digest is skipped, so a run that was
    killed can simply be run again (nothing is written twice); a destination record with other
    content is never overwritten (its id is listed in ``report.conflicts``).  ``dry_run``
    writes nothing and reports what would move.  With ``check`` (the default, not on a dry
    run) the run ends with :func:`verify`.  Stop every worker on ``src`` first: records
    committed during the copy may be missed or reported as differences.
    """
    if src is dst:
        raise ValueError("the source and the destination are the same store object")
    require_records(src, "source")
    require_records(dst, "destination")
    ids = source_ids(src, page=page)
    report = MigrationReport(dry_run=dry_run, untargeted_outbox=ids.untargeted_outbox)
    phase = "dry-run" if dry_run else "migrate"
    for done, execution_id in enumerate(ids.ids, start=1):
        _step(src, dst, execution_id, report)
        if progress is not None:
            refused = len(report.conflicts) + len(report.rejected)
            progress(
                Progress(
                    phase,
                    done,
                    len(ids.ids),
                    len(report.moved_ids),
                    len(report.already_there),
                    refused,
                )
            )
    if check and not dry_run:
        report.verification = verify(src, dst, page=page, progress=progress)
    return report
