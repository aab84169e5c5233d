"""Commit tokens: kept for a re-send of the same commit, fresh otherwise; unsettled outcomes."""

from __future__ import annotations

import pytest
from harel.model import Event, Execution, Status
from harel.store.common.commit import (
    RECEIPT_WINDOW,
    PreparedCommit,
    _bump_and_prepare,
    outcome_error,
    receipt_slot,
    resent_and_stored,
    stored_as,
)
from harel.store.errors import CommitOutcomeUnknown, StoreConflict, StoreUnavailable

ARGS = ([(None, Event(id="e", kind="Go"))], "in-1", [], [], None)


def _prepare(exe: Execution, args: tuple = ARGS):  # type: ignore[no-untyped-def, type-arg]
    prepared = _bump_and_prepare(exe, args, 1 << 20)
    exe.version = prepared.expected_version  # as after a failed attempt
    return prepared


def test_the_same_object_resending_the_same_commit_keeps_its_token() -> None:
    exe = Execution(id="a", definition_id="d")
    first = _prepare(exe)
    assert len(first.token) == 32
    assert _prepare(exe).token == first.token


def test_a_changed_commit_or_another_copy_gets_a_fresh_token() -> None:
    exe = Execution(id="a", definition_id="d")
    first = _prepare(exe)
    copy = exe.model_copy(deep=True)
    assert _prepare(copy).token != first.token, "another object is another writer"
    exe.context = {"changed": True}
    assert _prepare(exe).token != first.token
    exe.context = {}
    other_args = ([], "in-2", [], [], None)
    assert _prepare(exe, other_args).token != first.token


def test_a_commit_from_another_version_gets_a_fresh_token() -> None:
    exe = Execution(id="a", definition_id="d")
    first = _prepare(exe)
    exe.version = 5
    assert _prepare(exe).token != first.token


def test_receipt_rules() -> None:
    exe = Execution(id="a", definition_id="d", version=3)
    prepared = _prepare(exe)
    assert resent_and_stored(prepared, 4, prepared.token)
    assert resent_and_stored(prepared, 4 + RECEIPT_WINDOW - 1, prepared.token)
    assert not resent_and_stored(prepared, 4, "f" * 32)
    assert not resent_and_stored(prepared, 3, prepared.token), "the version it writes is absent"
    assert not resent_and_stored(prepared, None, prepared.token)
    assert not resent_and_stored(prepared, 4, None)
    assert not resent_and_stored(prepared._replace(token=""), 4, "")
    assert {receipt_slot(v) for v in range(100)} == set(range(RECEIPT_WINDOW))


def test_a_resend_that_cannot_reach_the_server_stays_outcome_unknown() -> None:
    exe = Execution(id="unsettled", definition_id="d")
    prepared = _prepare(exe)
    refused = StoreUnavailable("no connection")
    assert outcome_error(prepared, refused) is refused, "nothing unsettled yet: plain is true"
    lost = CommitOutcomeUnknown("unsettled", 0, "reply lost")
    assert outcome_error(prepared, lost) is lost
    again = outcome_error(_prepare(exe), refused)
    assert isinstance(again, CommitOutcomeUnknown) and again.__cause__ is refused
    assert "earlier attempt" in str(again)
    conflict = StoreConflict("unsettled", 0, 1)
    assert outcome_error(prepared, conflict) is conflict  # settled: a rival won the version
    assert outcome_error(prepared, refused) is refused


def test_commit_envelope_raises_outcome_unknown_for_an_unsettled_resend() -> None:
    from harel.store.common.commit import committing

    exe = Execution(id="envelope", definition_id="d")
    emits = [(None, Event(id="e", kind="Go"))]
    with pytest.raises(CommitOutcomeUnknown), committing(exe, emits):
        raise CommitOutcomeUnknown("envelope", 0)
    assert exe.version == 0
    with pytest.raises(CommitOutcomeUnknown) as raised, committing(exe, emits):
        raise StoreUnavailable("refused before sending")
    assert isinstance(raised.value.__cause__, StoreUnavailable)
    assert exe.version == 0


def _stored_commit(exe: Execution) -> PreparedCommit:
    """Prepare a state-only commit of ``exe`` and record it as stored (a successful commit)."""
    prepared = _bump_and_prepare(exe, ([], None, (), (), None), 1 << 20)
    stored_as(exe, prepared)
    return prepared


def test_the_fence_says_whether_the_stored_summary_is_the_one_written() -> None:
    exe = Execution(id="kept", definition_id="d", status=Status.RUNNING, active_path="A")
    first = _stored_commit(exe)
    assert first.base is None and not first.summary_stored, "nothing stored it before"
    exe.context = {"n": 1}  # the document changes, the summary does not
    second = _stored_commit(exe)
    assert second.base == first.token and second.summary_stored
    for change in ({"active_path": "B"}, {"outcome": "done"}, {"status": Status.DONE}):
        for name, value in change.items():
            setattr(exe, name, value)
        changed = _stored_commit(exe)
        assert changed.base is not None and not changed.summary_stored, change
    copy = exe.model_copy(deep=True)  # another object: no fence, whatever its summary
    fresh = _bump_and_prepare(copy, ([], None, (), (), None), 1 << 20)
    assert fresh.base is None and not fresh.summary_stored
    # a re-send keeps the first attempt's fence and summary flag, even after success
    last = _stored_commit(exe)
    exe.version = last.expected_version
    again = _bump_and_prepare(exe, ([], None, (), (), None), 1 << 20)
    assert (again.token, again.base, again.summary_stored) == (
        last.token,
        last.base,
        last.summary_stored,
    )


def test_the_commit_fields_the_hot_paths_slice_are_adjacent() -> None:
    fields = PreparedCommit._fields
    summary = ("definition_id", "status", "outcome", "active_path", "parent_id")
    start = fields.index("definition_id")
    assert fields[start : start + len(summary)] == summary
    side = ("emits", "processed_event_id", "timers", "spawns", "trace", "committed_at")
    start = fields.index("emits")
    assert fields[start : start + len(side)] == side
