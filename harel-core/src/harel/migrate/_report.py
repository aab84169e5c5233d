"""What a migration or a verification found: counts per kind, ids per outcome, typed errors."""

from __future__ import annotations

from dataclasses import dataclass, field

from harel.store.contract import ExecutionRecord
from harel.store.errors import StoreError

KINDS = ("executions", "relay_only", "marks", "timers", "outbox", "spawns", "trace")
"""The kinds a record holds, in report order (``relay_only``: records with no execution)."""

SHOWN_IDS = 20
"""How many ids a summary line names before it says ``...``."""


@dataclass(slots=True)
class Counts:
    """How many of each kind (:data:`KINDS`) a set of records holds: ``counts.timers``, ...

    ``executions`` counts records holding an execution, ``relay_only`` those holding only
    outbox entries; the other kinds count marks, timers, outbox entries, spawn intents and
    trace steps.
    """

    by_kind: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))

    def __getattr__(self, kind: str) -> int:
        if kind in KINDS:
            return self.by_kind[kind]
        raise AttributeError(f"Counts has no kind {kind!r}; the kinds are {', '.join(KINDS)}")

    def add(self, record: ExecutionRecord) -> None:
        """Count everything ``record`` holds."""
        has = "relay_only" if record.execution is None else "executions"
        sizes = {
            has: 1,
            "marks": len(record.processed),
            "timers": len(record.timers),
            "outbox": len(record.outbox),
            "spawns": len(record.spawns),
            "trace": len(record.trace),
        }
        for kind, size in sizes.items():
            self.by_kind[kind] += size

    def as_dict(self) -> dict[str, int]:
        """The counts by kind, in :data:`KINDS` order."""
        return {kind: self.by_kind[kind] for kind in KINDS}

    def describe(self) -> str:
        """``3 executions, 1 relay_only, ...`` (every kind, zeros included)."""
        return ", ".join(f"{count} {kind}" for kind, count in self.as_dict().items())


def show_ids(ids: list[str]) -> str:
    """The first :data:`SHOWN_IDS` ids, comma separated, with ``...`` when there are more."""
    head = ", ".join(ids[:SHOWN_IDS])
    return head + (f", ... ({len(ids)} in all)" if len(ids) > SHOWN_IDS else "")


@dataclass(frozen=True, slots=True)
class Difference:
    """One id whose destination record is not the source's: the sets that differ.

    ``sets`` names parts of the record (``execution``, ``processed``, ``timers``, ``outbox``,
    ``spawns``, ``trace``), or is ``("missing",)`` when the destination holds nothing for the
    id and ``("vanished",)`` when the source no longer does.
    """

    execution_id: str
    sets: tuple[str, ...]

    def describe(self) -> str:
        """``ID (timers, trace)``."""
        return f"{self.execution_id} ({', '.join(self.sets)})"


@dataclass(slots=True)
class VerifyReport:
    """The outcome of comparing every source record with the destination's.

    ``ok`` is true when every record the source holds is in the destination with the same
    digest.  ``only_in_destination`` counts listed destination executions the source does not
    hold (a destination may hold other data: reported, not a difference).
    """

    checked: int = 0
    source: Counts = field(default_factory=Counts)
    destination: Counts = field(default_factory=Counts)
    differences: list[Difference] = field(default_factory=list)
    only_in_destination: int = 0
    untargeted_outbox: int = 0

    @property
    def ok(self) -> bool:
        """No record differs."""
        return not self.differences

    def summary(self) -> str:
        """One line: what was compared and whether it matched."""
        verdict = (
            "all equal"
            if self.ok
            else f"{len(self.differences)} differ: "
            + show_ids([d.describe() for d in self.differences])
        )
        line = f"verified {self.checked} record(s) ({self.source.describe()}): {verdict}"
        if self.only_in_destination:
            line += f"; {self.only_in_destination} execution(s) only in the destination"
        return line


@dataclass(slots=True)
class MigrationReport:
    """The outcome of :func:`harel.migrate.migrate` (or of a dry run: nothing written).

    * ``moved`` — kinds copied (dry run: that would be copied), ``moved_ids`` their ids;
    * ``already_there`` — ids the destination already held with the same digest (skipped);
    * ``conflicts`` — ids the destination holds with different content: refused, untouched;
    * ``rejected`` — ids the destination refused to import, with its message;
    * ``vanished`` — ids listed by the source that it no longer held when exported;
    * ``untargeted_outbox`` — pending source outbox entries without a target (the runner drops
      them; counted, not moved);
    * ``verification`` — the final comparison (``None`` when skipped or on a dry run).
    """

    dry_run: bool = False
    moved: Counts = field(default_factory=Counts)
    moved_ids: list[str] = field(default_factory=list)
    already_there: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)
    vanished: list[str] = field(default_factory=list)
    untargeted_outbox: int = 0
    verification: VerifyReport | None = None

    @property
    def ok(self) -> bool:
        """Nothing refused or rejected, and the verification (when run) found no difference."""
        return (
            not self.conflicts
            and not self.rejected
            and (self.verification is None or self.verification.ok)
        )

    def summary(self) -> str:
        """One line: what moved (or would), what was skipped, refused or dropped."""
        verb = "would move" if self.dry_run else "moved"
        parts = [
            f"{verb} {len(self.moved_ids)} record(s) ({self.moved.describe()})",
            f"{len(self.already_there)} already in the destination",
        ]
        if self.conflicts:
            parts.append(
                f"{len(self.conflicts)} conflicting (refused, destination left as is): "
                + show_ids(self.conflicts)
            )
        if self.rejected:
            parts.append(
                f"{len(self.rejected)} rejected by the destination: "
                + show_ids([f"{key} ({why})" for key, why in self.rejected.items()])
            )
        if self.vanished:
            parts.append(f"{len(self.vanished)} gone from the source meanwhile")
        if self.untargeted_outbox:
            parts.append(
                f"{self.untargeted_outbox} untargeted outbox entr(y/ies) not moved "
                "(the runner drops them)"
            )
        return "; ".join(parts)

    def check(self) -> None:
        """Raise :class:`MigrationConflict` or :class:`VerificationFailed` unless :attr:`ok`."""
        if self.conflicts or self.rejected:
            raise MigrationConflict(self.conflicts, self.rejected)
        if self.verification is not None and not self.verification.ok:
            raise VerificationFailed(self.verification)


class MigrationError(StoreError):
    """Base class of what :meth:`MigrationReport.check` raises."""


class MigrationConflict(MigrationError):
    """Some ids were not moved: the destination holds other content for them (``ids``) or
    refused their records (``rejected``: id -> reason).  Nothing of theirs was overwritten;
    inspect or purge them in the destination and run the migration again."""

    def __init__(self, ids: list[str], rejected: dict[str, str] | None = None) -> None:
        self.ids = list(ids)
        self.rejected = dict(rejected or {})
        parts = []
        if self.ids:
            parts.append(
                f"{len(self.ids)} id(s) hold different content in the destination: "
                f"{show_ids(self.ids)}"
            )
        if self.rejected:
            parts.append(
                f"{len(self.rejected)} record(s) refused by the destination: "
                f"{show_ids([f'{k} ({v})' for k, v in self.rejected.items()])}"
            )
        super().__init__(
            "; ".join(parts) + "; nothing of theirs was overwritten: inspect or purge them in "
            "the destination, then run the migration again"
        )


class VerificationFailed(MigrationError):
    """The destination does not hold what the source holds; ``report`` says which ids and
    which sets differ.  Re-run the migration (it skips what is already equal) or inspect."""

    def __init__(self, report: VerifyReport) -> None:
        self.report = report
        super().__init__(report.summary())
