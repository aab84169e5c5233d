"""jsondir's plans driven without a disk: a dict of file texts answers every request."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from harel import Event, Execution, Status, StoreConflict, TimerOp
from harel.store.common.claims import relay_due
from harel.store.common.commit import committing
from harel.store.common.drive import drive
from harel.store.common.enqueue import prepare_enqueue
from harel.store.common.listing import ListingQuery, listing_query
from harel.store.errors import AlreadyProcessed, ExecutionActive, LeaseLost, StoreCorrupted
from harel_example_jsondir import _schema
from harel_example_jsondir._plan import PLAN, Plan, Read, Request, Write


class Files:
    """File texts by relative path, and the log of every request a plan made."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self.log: list[Request] = []

    def execute(self, request: Request) -> Any:
        self.log.append(request)
        if isinstance(request, Read):
            return self.texts.get(request.path)
        if isinstance(request, Write):
            for path, text in request.files:
                assert _schema.is_store_file(path), path
                if text is None:
                    self.texts.pop(path, None)
                else:
                    self.texts[path] = text
        return None

    def run(self, plan: Plan[Any]) -> Any:
        return drive(plan, self.execute)

    def writes(self) -> list[Write]:
        return [request for request in self.log if isinstance(request, Write)]

    def commit(self, exe: Execution, emits: Any, *args: Any, **kwargs: Any) -> None:
        with committing(exe, emits, *args, **kwargs) as prepared:
            self.run(PLAN.commit(prepared, 200))


def _all(limit: int) -> ListingQuery:
    return listing_query(
        status=None, definition_id=None, roots_only=False, limit=limit, cursor=None
    )


@pytest.fixture
def files() -> Files:
    return Files()


def test_a_commit_is_one_write_of_document_state_and_trace(files: Files) -> None:
    exe = Execution(id="a", definition_id="d")
    files.commit(exe, [("b", Event(id="e", kind="k"))], processed_event_id="p", trace={"x": 1})
    assert exe.version == 1
    [write] = files.writes()
    assert [path for path, _ in write.files] == [
        _schema.document_path("a"),
        _schema.STATE,
        _schema.trace_path("a"),
    ]
    assert files.run(PLAN.load("a")) == exe
    assert files.run(PLAN.read_trace("a")) == [{"x": 1, "index": 0}]
    assert files.run(PLAN.load_for_event("a", "p")) == (exe, True)


def test_a_lost_cas_writes_nothing_and_restores_the_version(files: Files) -> None:
    files.commit(Execution(id="a", definition_id="d"), [])
    stale = Execution(id="a", definition_id="d")
    files.log.clear()
    with pytest.raises(StoreConflict):
        files.commit(stale, [(None, Event(kind="lost"))], processed_event_id="p")
    assert stale.version == 0
    assert files.writes() == []


def test_a_recorded_event_id_is_refused_with_nothing_written(files: Files) -> None:
    exe = Execution(id="a", definition_id="d")
    files.commit(exe, [], processed_event_id="p")
    before = dict(files.texts)
    files.log.clear()
    with pytest.raises(AlreadyProcessed) as caught:
        files.commit(
            exe,
            [(None, Event(kind="again"))],
            processed_event_id="p",
            timers=(TimerOp.schedule("t", 5.0),),
            trace={"x": 2},
        )
    assert (caught.value.event_id, caught.value.found, exe.version) == ("p", 1, 1)
    assert [type(request) for request in files.log] == [Read]  # decided on state.json alone
    assert files.texts == before


def test_a_resent_commit_with_its_own_mark_answers_success_writing_nothing(
    files: Files,
) -> None:
    exe = Execution(id="a", definition_id="d")
    emits = [(None, Event(id="out", kind="k"))]
    files.commit(exe, emits, processed_event_id="p")
    before = dict(files.texts)
    exe.version = 0  # what the envelope restores when the reply is lost
    files.log.clear()
    files.commit(exe, emits, processed_event_id="p")
    assert exe.version == 1
    assert files.writes() == [] and files.texts == before


def test_a_fenced_commit_is_still_one_read_and_one_write(files: Files) -> None:
    exe = Execution(id="a", definition_id="d")
    files.commit(exe, [], processed_event_id="p")
    files.log.clear()
    files.commit(exe, [], processed_event_id="q")  # carries the fence of version 1
    assert [type(request) for request in files.log] == [Read, Write]
    assert exe.version == 2


def test_the_fence_refuses_a_stored_copy_of_a_recreated_execution(files: Files) -> None:
    old = Execution(id="a", definition_id="d", status=Status.DONE, context={"who": "old"})
    files.commit(old, [])
    assert files.run(PLAN.purge("a", False)) is True
    new = Execution(id="a", definition_id="d", context={"who": "new"})
    files.commit(new, [])
    before = dict(files.texts)
    files.log.clear()
    old.context["who"] = "stale"
    with pytest.raises(StoreConflict) as caught:  # same version 1, another commit wrote it
        files.commit(old, [], processed_event_id="p")
    assert not isinstance(caught.value, AlreadyProcessed)
    assert (caught.value.found, old.version) == (1, 1)
    assert files.writes() == [] and files.texts == before
    files.commit(new, [])  # the live copy goes on
    assert files.run(PLAN.load("a")).context == {"who": "new"}


def test_summaries_carry_the_commit_time_and_marks_their_age(files: Files) -> None:
    exe = Execution(id="a", definition_id="d")
    files.commit(exe, [], processed_event_id="p")
    state = json.loads(files.texts[_schema.STATE])
    at = state["executions"]["a"]["updated_at"]
    assert isinstance(at, float) and state["processed"]["a"] == {"p": at}
    [summary] = files.run(PLAN.list_executions(_all(10))).items
    assert summary.updated_at == at


def _seed_two(files: Files) -> None:
    done = Execution(id="done", definition_id="d", status=Status.DONE)
    files.commit(
        done,
        [("done", Event(kind="self")), ("other", Event(kind="out"))],
        processed_event_id="p",
        timers=(TimerOp.schedule("t", 5.0),),
        spawns=(("child", "", {}),),
        trace={"s": 1},
    )
    other = Execution(id="other", definition_id="d")
    files.commit(other, [("done", Event(kind="in"))], processed_event_id="q", trace={})


def test_purge_removes_everything_of_one_execution_in_one_write(files: Files) -> None:
    _seed_two(files)
    files.log.clear()
    assert files.run(PLAN.purge("done", False)) is True
    [write] = files.writes()
    assert dict(write.files)[_schema.document_path("done")] is None
    assert dict(write.files)[_schema.trace_path("done")] is None
    assert files.run(PLAN.load("done")) is None
    assert files.run(PLAN.read_trace("done")) == []
    assert not files.run(PLAN.is_processed("done", "p"))
    assert files.run(PLAN.due_timers(10.0, None)) == []
    assert files.run(PLAN.pending_spawns(None)) == []
    assert [e.target_id for e in files.run(PLAN.pending_outbox(None))] == ["other"]
    # the other execution is untouched
    assert files.run(PLAN.is_processed("other", "q"))
    assert files.run(PLAN.read_trace("other")) == [{"index": 0}]


def test_purge_refuses_an_unfinished_execution_unless_forced(files: Files) -> None:
    _seed_two(files)
    files.log.clear()
    with pytest.raises(ExecutionActive) as info:
        files.run(PLAN.purge("other", False))
    assert info.value.status == "PENDING"
    assert files.writes() == []
    assert files.run(PLAN.purge("other", True)) is True
    assert files.run(PLAN.load("other")) is None


def test_purging_an_unknown_id_writes_nothing(files: Files) -> None:
    _seed_two(files)
    files.log.clear()
    assert files.run(PLAN.purge("nobody", False)) is False
    assert files.writes() == []


def test_prune_drops_old_marks_in_batches_with_a_pause_between(files: Files) -> None:
    for index in range(5):
        files.commit(Execution(id=f"e{index}", definition_id="d"), [], processed_event_id="p")
    state = json.loads(files.texts[_schema.STATE])
    state["processed"] = {f"e{index}": {"p": 100.0 + index} for index in range(5)}
    files.texts[_schema.STATE] = json.dumps(state)
    files.log.clear()
    assert files.run(PLAN.prune_processed(104.0, 2)) == 4  # 104.0 itself is not older
    kinds = [type(request).__name__ for request in files.log if not isinstance(request, Read)]
    assert kinds == ["Write", "Pause", "Write", "Pause"]
    assert [files.run(PLAN.is_processed(f"e{i}", "p")) for i in range(5)].count(True) == 1


@pytest.mark.parametrize(
    ("older_than", "batch_size", "error"),
    [
        ("1", 10, TypeError),
        (True, 10, TypeError),
        (float("nan"), 10, ValueError),
        (float("inf"), 10, ValueError),
        (1.0, 0, ValueError),
        (1.0, 2.5, TypeError),
        (1.0, True, TypeError),
    ],
)
def test_prune_arguments_are_checked_before_any_read(
    files: Files, older_than: Any, batch_size: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        files.run(PLAN.prune_processed(older_than, batch_size))
    assert files.log == []


@pytest.mark.parametrize(
    "plan",
    [
        lambda: PLAN.load(1),  # type: ignore[arg-type]
        lambda: PLAN.load_for_event("a", None),  # type: ignore[arg-type]
        lambda: PLAN.delete_timer("a", "t", None),  # type: ignore[arg-type]
        lambda: PLAN.delete_timer(b"a", "t", 1.0),  # type: ignore[arg-type]
        lambda: PLAN.ack_outbox("1"),  # type: ignore[arg-type]
        lambda: PLAN.due_timers("soon", None),  # type: ignore[arg-type]
        lambda: PLAN.purge("a", "yes"),  # type: ignore[arg-type]
        lambda: PLAN.read_trace(None),  # type: ignore[arg-type]
    ],
)
def test_wrong_argument_types_raise_type_error_before_any_read(files: Files, plan: Any) -> None:
    with pytest.raises(TypeError):
        files.run(plan())
    assert files.log == []


def test_a_document_holding_another_id_is_reported_not_served(files: Files) -> None:
    files.commit(Execution(id="a", definition_id="d"), [])
    files.texts[_schema.document_path("b")] = files.texts[_schema.document_path("a")]
    with pytest.raises(StoreCorrupted, match="holds execution 'a'"):
        files.run(PLAN.load("b"))


def _damage(files: Files, table: str, index: int) -> None:
    """Make the last field (event / context text) of one relay row undecodable."""
    state = json.loads(files.texts[_schema.STATE])
    state[table][index][-1] = "{not json"
    files.texts[_schema.STATE] = json.dumps(state)


def _three_events(files: Files) -> None:
    events = [("a", "e1"), ("b", "e2"), ("a", "e3")]
    emits = [(target, Event(id=event_id, kind="k")) for target, event_id in events]
    files.commit(Execution(id="a", definition_id="d"), emits)


def test_a_damaged_outbox_entry_is_quarantined_and_the_sweep_goes_on(
    files: Files, caplog: pytest.LogCaptureFixture
) -> None:
    _three_events(files)
    _damage(files, "outbox", 0)
    with pytest.raises(StoreCorrupted, match="outbox entry 1"):  # a direct read names it
        files.run(PLAN.export_execution("a"))
    files.log.clear()
    with caplog.at_level(logging.WARNING, logger="harel_example_jsondir"):
        entries = files.run(PLAN.pending_outbox(None))
    assert [entry.event.id for entry in entries] == ["e2", "e3"]
    assert "outbox entry 1" in caplog.text
    assert len(files.writes()) == 1  # moved aside once ...
    files.log.clear()
    assert [entry.event.id for entry in files.run(PLAN.pending_outbox(1))] == ["e2"]
    assert files.writes() == []  # ... so later sweeps neither write nor warn again
    with pytest.raises(StoreCorrupted, match="outbox entry 1 of execution 'a' was quarantined"):
        files.run(PLAN.export_execution("a"))
    other = files.run(PLAN.export_execution("b"))
    assert other.execution is None and [e.event.id for e in other.outbox] == ["e2"]
    assert files.run(PLAN.purge("a", True)) is True
    assert json.loads(files.texts[_schema.STATE])["quarantine"] == []  # purged with its owner


def test_a_damaged_spawn_intent_is_quarantined_and_the_sweep_goes_on(files: Files) -> None:
    spawns = [("c1", "R", {"n": 1}), ("c2", "R", {"n": 2})]
    files.commit(Execution(id="a", definition_id="d"), [], spawns=spawns)
    _damage(files, "spawns", 0)
    assert [entry.child_id for entry in files.run(PLAN.pending_spawns(None))] == ["c2"]
    with pytest.raises(StoreCorrupted, match="spawns entry 1 of execution 'a'"):
        files.run(PLAN.export_execution("a"))


def _work(files: Files) -> list[list[Any]]:
    return list(json.loads(files.texts[_schema.STATE])["work"])


def test_work_rows_ride_in_the_commits_own_state_write(files: Files) -> None:
    files.commit(Execution(id="a", definition_id="d"), [])  # state only: no work row
    assert _work(files) == []
    files.log.clear()
    exe = Execution(id="b", definition_id="d", priority=3)
    files.commit(exe, [("a", Event(id="e", kind="k"))], timers=[TimerOp.schedule("t", 50.0)])
    [write] = files.writes()  # the same single write: document + state.json, nothing added
    assert [path for path, _ in write.files] == [_schema.document_path("b"), _schema.STATE]
    committed_at = json.loads(files.texts[_schema.STATE])["executions"]["b"]["updated_at"]
    assert {row[0]: row[1:3] for row in _work(files)} == {
        "a": [3, relay_due(committed_at)],  # the emit target's row: the emitter's priority
        "b": [3, 50.0],
    }


def test_an_enqueue_is_one_read_and_one_write_of_the_state_alone(files: Files) -> None:
    exe = Execution(id="t", definition_id="d", priority=1)
    files.commit(exe, [], timers=[TimerOp.schedule("t", 50.0)])
    files.log.clear()
    old = prepare_enqueue("t", Event(id="q1", kind="k"), 4)
    new = prepare_enqueue("nobody", Event(id="q2", kind="k"), 3)
    first, second = files.run(PLAN.enqueue(old)), files.run(PLAN.enqueue(new))
    assert (first, second) == (1, 2)
    assert [type(request) for request in files.log] == [Read, Write] * 2
    assert all(dict(write.files).keys() == {_schema.STATE} for write in files.writes())
    assert [(e.seq, e.target_id) for e in files.run(PLAN.pending_outbox(None))] == [
        (1, "t"),
        (2, "nobody"),
    ]
    assert {row[0]: row[1:3] for row in _work(files)} == {
        "t": [1, relay_due(old.enqueued_at)],  # an existing row keeps its own priority
        "nobody": [3, relay_due(new.enqueued_at)],  # a new row takes the enqueue's
    }
    assert files.run(PLAN.load("t")) == exe


def test_claim_renew_release_are_one_read_and_one_write_each(files: Files) -> None:
    files.commit(Execution(id="a", definition_id="d"), [], timers=[TimerOp.schedule("t", 5.0)])
    files.log.clear()
    assert files.run(PLAN.claim("w", 1.0, 30.0, 10)) == []  # nothing ready: nothing written
    assert [type(request) for request in files.log] == [Read]
    files.log.clear()
    [claim] = files.run(PLAN.claim("w", 10.0, 30.0, 10))
    assert (claim.execution_id, claim.timers, claim.expires_at) == ("a", (("t", 5.0),), 40.0)
    assert files.run(PLAN.renew("w", "a", 20.0, 30.0)) == 50.0
    files.run(PLAN.release("w", "a", 60.0, 21.0))
    assert [type(request) for request in files.log] == [Read, Write] * 3
    assert _work(files) == [["a", 0, 60.0, None]]  # free again, not before retry_at
    with pytest.raises(LeaseLost):
        files.run(PLAN.renew("w", "a", 22.0, 30.0))


def test_claim_quarantines_a_damaged_entry_and_claims_the_rest(
    files: Files, caplog: pytest.LogCaptureFixture
) -> None:
    _three_events(files)
    _damage(files, "outbox", 0)
    with caplog.at_level(logging.WARNING, logger="harel_example_jsondir"):
        claims = files.run(PLAN.claim("w", 1e12, 30.0, 10))
    assert {c.execution_id: [e.event.id for e in c.outbox] for c in claims} == {
        "a": ["e3"],
        "b": ["e2"],
    }
    assert "outbox entry 1" in caplog.text
    assert [entry[0] for entry in json.loads(files.texts[_schema.STATE])["quarantine"]] == [1]


def test_file_names_are_bounded_for_any_id() -> None:
    for execution_id in ["", "a", "𝄞" * 16384, "\ud800lone", "../../etc/passwd"]:
        assert _schema.is_store_file(_schema.document_path(execution_id))
        assert len(_schema.trace_path(execution_id)) == len("traces/") + 64 + len(".json")


@pytest.mark.parametrize(
    "path",
    [
        "../outside.json",
        "/etc/passwd",
        "executions/../../x.json",
        f"executions/{'0' * 64}.json/../../x",
        "executions/ABC.json",
        f"other/{'0' * 64}.json",
        "journal.json",
        ".lock",
        f"executions/{'0' * 64}.json\n",
        None,
    ],
)
def test_only_the_layouts_files_are_writable(path: Any) -> None:
    assert not _schema.is_store_file(path)
