"""The persisted value types: executions, events and the listing projections.

Every store persists an :class:`Execution` as one JSON document produced by
:mod:`harel.store.common.codec`; these models are the single source of that shape.

Unknown fields (rolling upgrades): building a model in code with a field it does not declare is
an error, but a record *read from a store* keeps the fields a newer release added — they are
carried through load → modify → commit unchanged and written back, so an older worker never
drops a newer release's data.  Stores decode with :data:`KEEP_UNKNOWN_FIELDS` as the
validation context to get that behaviour.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator

KEEP_UNKNOWN_FIELDS = {"harel_keep_unknown_fields": True}
"""Validation context under which a persisted record keeps the fields it does not declare
(``Execution.model_validate(data, context=KEEP_UNKNOWN_FIELDS)``)."""


def _new_id() -> str:
    return uuid.uuid4().hex


class Status(StrEnum):
    """Lifecycle of an execution; the value equals the name so JSON stays readable."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    DONE = "DONE"
    CANCELLED = "CANCELLED"
    SUSPENDED = "SUSPENDED"
    CANCELLING = "CANCELLING"
    FAILED = "FAILED"


class _Persisted(BaseModel):
    """A persisted model: strict when built in code, lossless when read back from a store."""

    model_config = ConfigDict(extra="allow", ser_json_inf_nan="constants")

    @model_validator(mode="before")
    @classmethod
    def _declared_fields_only(cls, data: Any, info: ValidationInfo) -> Any:
        context = info.context if isinstance(info.context, dict) else {}
        if isinstance(data, dict) and not context.get("harel_keep_unknown_fields"):
            unknown = sorted(str(key) for key in data if key not in cls.model_fields)
            if unknown:
                raise ValueError(
                    f"{cls.__name__} has no field(s) {', '.join(unknown)}; fields a newer "
                    "release added are kept only on records read from a store"
                )
        return data


class Event(_Persisted):
    """Something delivered to an execution; ``id`` is the dedupe key, so a retry must reuse it."""

    id: str = Field(default_factory=_new_id)
    kind: str
    created_time: datetime | None = None
    received_time: datetime | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class ChildState(_Persisted):
    """A parent's join bookkeeping for one child execution (an orthogonal region)."""

    root_path: str
    finished: bool = False
    outcome: str | None = None
    result: dict[str, Any] = Field(default_factory=dict)
    submachine: bool = False
    key: str = ""


class Execution(_Persisted):
    """One running (or finished) statechart instance; ``version`` is the store's CAS token.

    ``version == 0`` means "never stored"; a successful commit sets it to the stored version.
    """

    id: str = Field(default_factory=_new_id)
    definition_id: str
    definition_fqn: str | None = None
    root_path: str = ""
    status: Status = Status.PENDING
    outcome: str | None = None
    error: str | None = None
    active_path: str | None = None
    history: dict[str, str] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)
    processed_events: int = 0
    version: int = 0
    priority: int = Field(default=0, ge=0, le=4)
    parent_id: str | None = None
    child_id: str | None = None
    deferred: list[Event] = Field(default_factory=list)
    children: dict[str, ChildState] = Field(default_factory=dict)
    invoke_seq: dict[str, int] = Field(default_factory=dict)
    armed_timers: dict[str, float] = Field(default_factory=dict)
    """``fire_at`` of each timer this execution armed and has not cancelled, by state path
    (the runner keeps it; a due ``Timeout`` earlier than the armed one is stale)."""


class ExecutionSummary(BaseModel):
    """The listing projection of an execution: no context, no history."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    definition_id: str
    status: Status
    outcome: str | None = None
    active_path: str | None = None
    version: int = 0
    parent_id: str | None = None
    updated_at: float | None = None
    """Epoch seconds of the last commit, by the committing process's clock (``None`` when the
    summary was not read from a store)."""

    @classmethod
    def of(cls, exe: Execution) -> ExecutionSummary:
        """Project a live execution."""
        return cls(
            id=exe.id,
            definition_id=exe.definition_id,
            status=exe.status,
            outcome=exe.outcome,
            active_path=exe.active_path,
            version=exe.version,
            parent_id=exe.parent_id,
        )

    @classmethod
    def from_data(cls, data: dict[str, Any], version: int) -> ExecutionSummary:
        """Project a parsed execution document plus its separately stored version."""
        return cls(
            id=data["id"],
            definition_id=data["definition_id"],
            status=Status(data.get("status", Status.PENDING.value)),
            outcome=data.get("outcome"),
            active_path=data.get("active_path"),
            version=version,
            parent_id=data.get("parent_id"),
        )


class ExecutionPage(BaseModel):
    """One page of a listing; ``next_cursor is None`` means there are no more pages."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    items: list[ExecutionSummary] = Field(default_factory=list)
    next_cursor: str | None = None
