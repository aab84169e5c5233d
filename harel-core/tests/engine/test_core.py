"""Pure engine tests (engine.md §3): hand-built definitions, a fake driver, no store."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from harel.engine._navigation import navigation_of
from harel.engine.core import (
    RESERVED_KINDS,
    EngineError,
    choose,
    is_domain_event,
    process,
    run_to_completion,
    start,
    timeout_event,
    timeout_event_id,
)
from harel.engine.definition import (
    ActionRef,
    Chooser,
    Definition,
    Node,
    NodeKind,
    Transition,
    Trigger,
)
from harel.engine.effects import (
    CancelTimer,
    Effect,
    EmitEvent,
    RunAction,
    RunChooser,
    ScheduleTimer,
    SpawnChildren,
)
from harel.model import ChildState, Event, Execution, Status

# --- a tiny hand builder (the DSL has its own tests) -----------------------------------------


def _noop(stm: Any, event: Any, **_: Any) -> None:
    return None


class Builder:
    """Assembles a Definition with full paths; actions default to no-ops labelled by name."""

    def __init__(self, machine: str, initial: str) -> None:
        self.root = Node(name=machine, path="", kind=NodeKind.COMPOSITE, initial=initial)
        self.index: dict[str, Node] = {"": self.root}
        self.id = machine

    def state(
        self,
        path: str,
        kind: NodeKind = NodeKind.LEAF,
        *,
        enter: str | None = None,
        exit: str | None = None,
        fn: Callable[..., Any] | None = None,
        **attrs: Any,
    ) -> Node:
        parent_path, _, name = path.rpartition(".")
        parent = self.index[parent_path]
        node = Node(name=name, path=path, kind=kind, parent=parent, **attrs)
        if enter:
            node.on_enter = ActionRef(enter, fn or _noop)
        if exit:
            node.on_exit = ActionRef(exit, _noop)
        parent.children.append(node)
        self.index[path] = node
        return node

    def on(
        self,
        scope: str,
        source: str,
        target: str | None,
        *kinds: str,
        where: Callable[[dict[str, Any]], bool] | None = None,
        chooser: tuple[str, str, str] | None = None,
    ) -> None:
        trigger = Trigger(frozenset(kinds), where) if kinds else None
        made = None
        if chooser is not None:
            mode, yes, no = chooser
            made = Chooser(mode, self.index[yes], self.index[no])  # type: ignore[arg-type]
        self.index[scope].transitions.append(
            Transition(
                source=self.index[source],
                target=None if target is None else self.index[target],
                trigger=trigger,
                chooser=made,
            )
        )

    def build(self) -> Definition:
        return Definition(id=self.id, root=self.root, index=dict(self.index))


@dataclass
class Run:
    """What one drive produced: action/chooser labels in order and the deferred effects."""

    actions: list[str] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    events: list[Event | None] = field(default_factory=list)


def drive(steps: Any, exe: Execution) -> Run:
    """A fake driver: calls actions with a minimal ``stm``, answers choosers with ``choose``."""
    run = Run()

    def answer(effect: Effect) -> Any:
        if isinstance(effect, RunAction):
            run.actions.append(effect.action.label)
            run.events.append(effect.event)
            target = effect.action.target
            assert callable(target)
            target(SimpleNamespace(execution_ctx=exe.context), effect.event, **effect.action.inputs)
            return None
        if isinstance(effect, RunChooser):
            run.actions.append(effect.chooser.label)
            return choose(effect.chooser, exe)
        run.effects.append(effect)
        return None

    run_to_completion(steps, answer)
    return run


def new(defn: Definition, **fields: Any) -> Execution:
    return Execution(definition_id=defn.id, **fields)


def started(defn: Definition, **fields: Any) -> tuple[Execution, Run]:
    exe = new(defn, **fields)
    return exe, drive(start(defn, exe), exe)


def send(defn: Definition, exe: Execution, kind: str, **data: Any) -> Run:
    return drive(process(defn, exe, Event(kind=kind, data=data)), exe)


# --- reference machines -----------------------------------------------------------------------


def parcel(*, pause: bool = False, history: bool = True, shadow: bool = False) -> Definition:
    b = Builder("parcel", "Idle")
    b.state("Idle")
    b.state(
        "Packing", NodeKind.COMPOSITE, enter="pk_in", exit="pk_out", initial="Wrap", history=history
    )
    b.state("Packing.Wrap", enter="wrap")
    b.state("Packing.Label", enter="label")
    b.state("Sent", enter="sent", outcome="success")
    b.on("Packing", "Packing.Wrap", "Packing.Label", "Next")
    b.on("Packing", "Packing.Label", "Sent", "Ship")
    b.on("", "Idle", "Packing", "Begin")
    if pause:
        b.on("", "Packing", "Idle", "Pause")
    if shadow:
        b.on("", "Packing", "Idle", "Ship")
    return b.build()


def invoice() -> Definition:
    b = Builder("invoice", "Open")
    b.state("Open", timeout=60.0)
    b.state("Settled", outcome="success")
    b.state("Expired", outcome="expired")
    b.on("", "Open", "Settled", "Paid")
    b.on("", "Open", "Expired", "Timeout")
    return b.build()


def keep_score(stm: Any, event: Event, **_: Any) -> None:
    stm.execution_ctx.update(score=event.data["score"])


def onboarding(*, retry: bool = False) -> Definition:
    b = Builder("onboarding", "Checks")
    b.state("Checks", NodeKind.ORTHOGONAL)
    b.state("Checks.Identity", NodeKind.REGION, initial="Pending")
    b.state("Checks.Identity.Pending")
    b.state("Checks.Identity.Verified", outcome="success")
    b.on("Checks.Identity", "Checks.Identity.Pending", "Checks.Identity.Verified", "IdOk")
    b.state("Checks.Credit", NodeKind.REGION, initial="Waiting", carry=("score",))
    b.state("Checks.Credit.Waiting")
    b.state("Checks.Credit.Scored", outcome="success", enter="keep_score", fn=keep_score)
    b.on("Checks.Credit", "Checks.Credit.Waiting", "Checks.Credit.Scored", "ScoreReady")
    b.state("Accepted", outcome="success")
    b.state("Rejected", outcome="rejected")
    b.on("", "Checks", None, chooser=("all", "Accepted", "Rejected"))
    if retry:
        b.on("", "Rejected", "Checks", "Retry")
    return b.build()


# --- parcel: paths, action order, shadowing, history -----------------------------------------


def test_parcel_paths_and_action_order() -> None:
    defn = parcel()
    exe, run = started(defn)
    assert (exe.status, exe.active_path, run.actions, run.effects) == (
        Status.RUNNING,
        "Idle",
        [],
        [],
    )
    assert send(defn, exe, "Begin").actions == ["pk_in", "wrap"]
    assert exe.active_path == "Packing.Wrap"
    assert send(defn, exe, "Next").actions == ["label"]
    assert exe.active_path == "Packing.Label"
    run = send(defn, exe, "Ship")
    assert run.actions == ["pk_out", "sent"]
    assert (exe.active_path, exe.status, exe.outcome) == ("Sent", Status.DONE, "success")
    assert exe.processed_events == 3


def test_actions_receive_the_triggering_event_and_none_on_start() -> None:
    defn = parcel()
    exe, _ = started(defn)
    begin = Event(kind="Begin")
    run = drive(process(defn, exe, begin), exe)
    assert run.events == [begin, begin]


def test_unmatched_event_changes_nothing_but_counts() -> None:
    defn = parcel()
    exe, _ = started(defn)
    before = exe.model_dump()
    run = send(defn, exe, "Ship")
    assert (run.actions, run.effects) == ([], [])
    after = exe.model_dump()
    assert after.pop("processed_events") == 1
    before.pop("processed_events")
    assert after == before


def test_inner_transition_shadows_the_composite_one() -> None:
    defn = parcel(shadow=True)
    exe, _ = started(defn)
    send(defn, exe, "Begin")
    send(defn, exe, "Next")
    send(defn, exe, "Ship")  # Label has its own Ship: inner wins
    assert exe.active_path == "Sent"


def test_composite_transition_applies_when_the_inner_state_has_none() -> None:
    defn = parcel(shadow=True)
    exe, _ = started(defn)
    send(defn, exe, "Begin")
    run = send(defn, exe, "Ship")  # Wrap has no Ship: Packing's own transition fires
    assert run.actions == ["pk_out"]
    assert (exe.active_path, exe.status) == ("Idle", Status.RUNNING)


def test_deep_history_resumes_the_last_active_child() -> None:
    defn = parcel(pause=True)
    exe, _ = started(defn)
    send(defn, exe, "Begin")
    send(defn, exe, "Next")
    assert send(defn, exe, "Pause").actions == ["pk_out"]
    assert exe.active_path == "Idle"
    assert exe.history["Packing"] == "Packing.Label"
    assert send(defn, exe, "Begin").actions == ["pk_in", "label"]
    assert exe.active_path == "Packing.Label"


def test_no_history_restarts_at_initial() -> None:
    defn = parcel(pause=True, history=False)
    exe, _ = started(defn)
    for kind in ("Begin", "Next", "Pause"):
        send(defn, exe, kind)
    assert send(defn, exe, "Begin").actions == ["pk_in", "wrap"]
    assert exe.active_path == "Packing.Wrap"


def test_deep_history_spans_nested_composites() -> None:
    b = Builder("deep", "Idle")
    b.state("Idle")
    b.state("Outer", NodeKind.COMPOSITE, initial="Mid")
    b.state("Outer.Mid", NodeKind.COMPOSITE, initial="A")
    b.state("Outer.Mid.A")
    b.state("Outer.Mid.B", enter="b")
    b.on("Outer.Mid", "Outer.Mid.A", "Outer.Mid.B", "Next")
    b.on("Outer.Mid", "Outer.Mid.B", "Outer.Mid.A", "Next")  # B waits: not a sink
    b.on("", "Idle", "Outer", "Go")
    b.on("", "Outer", "Idle", "Pause")
    defn = b.build()
    exe, _ = started(defn)
    for kind in ("Go", "Next", "Pause"):
        send(defn, exe, kind)
    assert send(defn, exe, "Go").actions == ["b"]
    assert exe.active_path == "Outer.Mid.B"


def test_a_completed_composite_restarts_at_initial() -> None:
    b = Builder("done_inside", "Idle")
    b.state("Idle")
    b.state("P", NodeKind.COMPOSITE, initial="A")
    b.state("P.A")
    b.state("P.B")  # a sink: completing it leaves P active, waiting on Back
    b.on("P", "P.A", "P.B", "Next")
    b.on("", "Idle", "P", "Go")
    b.on("", "P", "Idle", "Back")
    defn = b.build()
    exe, _ = started(defn)
    send(defn, exe, "Go")
    send(defn, exe, "Next")
    assert (exe.active_path, exe.status) == ("P", Status.RUNNING)
    assert "P" not in exe.history
    send(defn, exe, "Back")
    send(defn, exe, "Go")
    assert exe.active_path == "P.A"


def test_self_transition_runs_nothing() -> None:
    b = Builder("self", "A")
    b.state("A", enter="a_in", exit="a_out", timeout=5.0)
    b.on("", "A", "A", "Ping")
    defn = b.build()
    exe, _ = started(defn)
    run = send(defn, exe, "Ping")
    assert (run.actions, run.effects, exe.active_path) == ([], [], "A")


def test_transition_to_an_enclosing_composite_exits_and_reenters_it() -> None:
    b = Builder("restart", "P")
    b.state("P", NodeKind.COMPOSITE, enter="p_in", exit="p_out", initial="A", timeout=9.0)
    b.state("P.A", enter="a_in")
    b.state("P.B", exit="b_out")
    b.on("P", "P.A", "P.B", "Next")
    b.on("P", "P.B", "P.A", "Next")  # B waits: not a sink
    b.on("", "P", "P", "Restart")
    b.state("Never")
    b.on("", "P", "Never", "Never")
    defn = b.build()
    exe, _ = started(defn)
    send(defn, exe, "Next")
    run = send(defn, exe, "Restart")
    assert run.actions == ["b_out", "p_out", "p_in"]  # history brings B back
    assert run.effects == [CancelTimer("P"), ScheduleTimer("P", 9.0)]
    assert exe.active_path == "P.B"


def test_guards_and_several_kinds() -> None:
    b = Builder("guarded", "A")
    b.state("A")
    b.state("Big")
    b.state("Other")
    b.on("", "A", "Big", "Pay", where=lambda d: d["amount"] > 10)
    b.on("", "A", "Other", "Skip", "Later")
    defn = b.build()
    exe, _ = started(defn)
    send(defn, exe, "Pay")  # missing field: false, not an error
    send(defn, exe, "Pay", amount="lots")  # incomparable: false
    send(defn, exe, "Pay", amount=5)
    assert exe.active_path == "A"
    send(defn, exe, "Pay", amount=11)
    assert exe.active_path == "Big"
    exe2, _ = started(defn)
    send(defn, exe2, "Later")
    assert exe2.active_path == "Other"


# --- automatic transitions, sinks, outcomes ---------------------------------------------------


def test_automatic_transitions_and_a_sink_bubbling_out_of_a_composite() -> None:
    b = Builder("auto", "P")
    b.state("P", NodeKind.COMPOSITE, initial="A", exit="p_out")
    b.state("P.A", enter="a_in", exit="a_out")
    b.state("P.B", enter="b_in", outcome="inner")
    b.on("P", "P.A", "P.B")
    b.state("Q", enter="q_in", outcome="done")
    b.on("", "P", "Q")
    defn = b.build()
    exe, run = started(defn)
    assert run.actions == ["a_in", "a_out", "b_in", "p_out", "q_in"]
    assert run.events == [None] * 5
    # the inner verdict is forgotten once an automatic move carries the run on
    assert (exe.status, exe.outcome, exe.active_path) == (Status.DONE, "done", "Q")


@pytest.mark.parametrize(
    ("inner", "outer", "expected"),
    [("inner", "outer", "inner"), (None, "outer", "outer"), (None, None, None)],
)
def test_sink_outcome_innermost_wins(
    inner: str | None, outer: str | None, expected: str | None
) -> None:
    b = Builder("sink", "P")
    b.state("P", NodeKind.COMPOSITE, initial="A", outcome=outer)
    b.state("P.A", outcome=inner)
    defn = b.build()
    exe, _ = started(defn)
    assert (exe.status, exe.outcome, exe.active_path) == (Status.DONE, expected, "P")


@pytest.mark.parametrize("status", [Status.PENDING, Status.DONE, Status.FAILED])
def test_domain_events_ignored_unless_running(status: Status) -> None:
    defn = parcel()
    exe = new(defn, status=status, active_path="Idle")
    before = exe.model_dump()
    run = send(defn, exe, "Begin")
    assert (run.actions, run.effects) == ([], [])
    assert exe.model_dump() == before


@pytest.mark.parametrize("kind", sorted(RESERVED_KINDS - {"Finished", "Timeout"}))
def test_later_reserved_kinds_change_nothing(kind: str) -> None:
    b = Builder("reserved", "A")
    b.state("A")
    b.state("B")
    b.on("", "A", "B", kind)
    defn = b.build()
    exe, _ = started(defn)
    before = exe.model_dump()
    assert send(defn, exe, kind).effects == []
    assert exe.model_dump() == before


def test_start_twice_is_an_error() -> None:
    defn = parcel()
    exe, _ = started(defn)
    with pytest.raises(EngineError, match="only PENDING"):
        drive(start(defn, exe), exe)


# --- timers ------------------------------------------------------------------------------------


def test_invoice_timer_effects() -> None:
    defn = invoice()
    exe, run = started(defn)
    assert run.effects == [ScheduleTimer("Open", 60.0)]
    paid = send(defn, exe, "Paid")
    assert paid.effects == [CancelTimer("Open")]
    assert (exe.status, exe.outcome) == (Status.DONE, "success")


def test_invoice_timeout_expires() -> None:
    defn = invoice()
    exe, _ = started(defn)
    run = drive(process(defn, exe, timeout_event(exe.id, "Open", 560.0)), exe)
    assert run.effects == [CancelTimer("Open")]
    assert (exe.active_path, exe.status, exe.outcome) == ("Expired", Status.DONE, "expired")
    assert exe.processed_events == 1


def test_stale_timeout_changes_nothing() -> None:
    b = Builder("stale", "Open")
    b.state("Open", timeout=60.0)
    b.state("Later")
    b.state("Expired")
    b.on("", "Open", "Later", "Paid")
    b.on("", "Open", "Expired", "Timeout")
    b.on("", "Later", "Expired", "Timeout")  # would match if the guard did not stop it
    defn = b.build()
    exe, _ = started(defn)
    send(defn, exe, "Paid")
    before = exe.model_dump()
    run = drive(process(defn, exe, timeout_event(exe.id, "Open", 560.0)), exe)
    assert (run.actions, run.effects) == ([], [])
    assert exe.model_dump() == before


def nested_timers(*, inner_handler: bool) -> Definition:
    b = Builder("nested", "Work")
    b.state("Work", NodeKind.COMPOSITE, initial="Step", timeout=100.0, exit="work_out")
    b.state("Work.Step", timeout=10.0, exit="step_out")
    b.state("Work.Retry")
    b.state("Over", outcome="over")
    b.on("Work", "Work.Step", "Work.Retry", "Skip")  # Step waits even without a handler
    b.on("Work", "Work.Retry", "Work.Step", "Again")
    if inner_handler:
        b.on("Work", "Work.Step", "Work.Retry", "Timeout")
    b.on("", "Work", "Over", "Timeout")
    return b.build()


def test_start_arms_outer_then_inner_timer() -> None:
    _, run = started(nested_timers(inner_handler=True))
    assert run.effects == [ScheduleTimer("Work", 100.0), ScheduleTimer("Work.Step", 10.0)]


def test_composite_budget_timer_wins_over_inner_timeout_handler() -> None:
    defn = nested_timers(inner_handler=True)
    exe, _ = started(defn)
    run = drive(process(defn, exe, timeout_event(exe.id, "Work", 100.0)), exe)
    assert run.actions == ["step_out", "work_out"]
    assert run.effects == [CancelTimer("Work.Step"), CancelTimer("Work")]
    assert (exe.active_path, exe.outcome) == ("Over", "over")


def test_inner_timer_uses_its_own_handler() -> None:
    defn = nested_timers(inner_handler=True)
    exe, _ = started(defn)
    run = drive(process(defn, exe, timeout_event(exe.id, "Work.Step", 10.0)), exe)
    assert run.effects == [CancelTimer("Work.Step")]
    assert exe.active_path == "Work.Retry"


def test_inner_timer_without_handler_bubbles_to_the_composite() -> None:
    defn = nested_timers(inner_handler=False)
    exe, _ = started(defn)
    drive(process(defn, exe, timeout_event(exe.id, "Work.Step", 10.0)), exe)
    assert (exe.active_path, exe.status, exe.outcome) == ("Over", Status.DONE, "over")


def _set_backoff(stm: Any, event: Any, **_: Any) -> None:
    stm.execution_ctx["backoff"] = 7.5


def test_timeout_context_reads_the_key_after_on_enter() -> None:
    b = Builder("ctx", "Wait")
    b.state("Wait", enter="set_backoff", fn=_set_backoff, timeout=("context", "backoff"))
    b.state("Gone")
    b.on("", "Wait", "Gone", "Go")
    defn = b.build()
    _, run = started(defn, context={"backoff": 1})
    assert run.effects == [ScheduleTimer("Wait", 7.5)]


def test_timeout_context_defaults_to_zero_and_rejects_non_numbers() -> None:
    b = Builder("ctx", "Wait")
    b.state("Wait", timeout=("context", "backoff"))
    b.state("Gone")
    b.on("", "Wait", "Gone", "Go")
    defn = b.build()
    assert started(defn)[1].effects == [ScheduleTimer("Wait", 0.0)]
    with pytest.raises(EngineError, match="backoff"):
        started(defn, context={"backoff": "soon"})


def test_timeout_event_helpers() -> None:
    assert timeout_event_id("x", "Open", 560.0) == "timeout:x:Open:560.0"
    assert timeout_event_id("x", "Open", 560) == "timeout:x:Open:560.0"
    event = timeout_event("x", "A.B", 1.5)
    assert (event.id, event.kind) == ("timeout:x:A.B:1.5", "Timeout")
    assert event.data == {"path": "A.B", "fire_at": 1.5}


def test_domain_kinds() -> None:
    assert {
        "Start",
        "Finished",
        "Timeout",
        "Cancel",
        "Reset",
        "SetState",
        "Returned",
    } == RESERVED_KINDS
    assert is_domain_event(Event(kind="Paid"))
    assert not any(is_domain_event(Event(kind=k)) for k in RESERVED_KINDS)


# --- orthogonal regions -----------------------------------------------------------------------


IDENTITY = "p:Checks.Identity:0"
CREDIT = "p:Checks.Credit:0"


def region_child(defn: Definition, child_id: str, root_path: str) -> tuple[Execution, Run]:
    return started(defn, id=child_id, child_id=child_id, parent_id="p", root_path=root_path)


def finished(child_id: str, outcome: str | None, **carried: Any) -> Event:
    return Event(kind="Finished", data={"child_id": child_id, "outcome": outcome, **carried})


def test_fork_spawns_one_child_per_region() -> None:
    defn = onboarding()
    exe, run = started(defn, id="p")
    assert run.effects == [
        SpawnChildren(((IDENTITY, "Checks.Identity", {}), (CREDIT, "Checks.Credit", {})))
    ]
    assert exe.children == {
        IDENTITY: ChildState(root_path="Checks.Identity", key="Checks.Identity"),
        CREDIT: ChildState(root_path="Checks.Credit", key="Checks.Credit"),
    }
    assert (exe.active_path, exe.status) == ("Checks", Status.RUNNING)


def test_region_children_run_and_report_finished() -> None:
    defn = onboarding()
    ident, run = region_child(defn, IDENTITY, "Checks.Identity")
    assert (ident.active_path, run.effects) == ("Checks.Identity.Pending", [])
    assert send(defn, ident, "ScoreReady", score=1).effects == []  # not for this region
    run = send(defn, ident, "IdOk")
    assert (ident.active_path, ident.status, ident.outcome) == (
        "Checks.Identity.Verified",
        Status.DONE,
        "success",
    )
    [emit] = run.effects
    assert isinstance(emit, EmitEvent) and emit.to == "p"
    assert (emit.event.kind, emit.event.data) == (
        "Finished",
        {"child_id": IDENTITY, "outcome": "success"},
    )

    credit, _ = region_child(defn, CREDIT, "Checks.Credit")
    run = send(defn, credit, "ScoreReady", score=700)
    assert run.actions == ["keep_score"]
    [emit] = run.effects
    assert isinstance(emit, EmitEvent)
    assert emit.event.data == {"child_id": CREDIT, "outcome": "success", "score": 700}
    other = send(defn, ident, "IdOk")  # a DONE region ignores further events
    assert other.effects == []


def test_finished_events_get_fresh_ids() -> None:
    defn = onboarding()
    ids = set()
    for _ in range(2):
        ident, _ = region_child(defn, IDENTITY, "Checks.Identity")
        [emit] = send(defn, ident, "IdOk").effects
        assert isinstance(emit, EmitEvent)
        ids.add(emit.event.id)
    assert len(ids) == 2


def test_join_all_accepts() -> None:
    defn = onboarding()
    exe, _ = started(defn, id="p")
    first = drive(process(defn, exe, finished(IDENTITY, "success")), exe)
    assert (first.actions, first.effects, exe.active_path) == ([], [], "Checks")
    assert exe.children[IDENTITY].finished and exe.children[IDENTITY].outcome == "success"
    assert "region_results" not in exe.context
    second = drive(process(defn, exe, finished(CREDIT, "success", score=700)), exe)
    assert second.actions == ["join all"]
    assert exe.children[CREDIT].result == {"score": 700}
    assert exe.context["region_results"] == {
        "Checks.Identity": {"outcome": "success"},
        "Checks.Credit": {"outcome": "success", "score": 700},
    }
    assert (exe.active_path, exe.status, exe.outcome) == ("Accepted", Status.DONE, "success")
    assert exe.invoke_seq == {"Checks": 1}
    assert exe.processed_events == 0  # Finished is bookkeeping, not a handled domain event


def test_join_all_rejects_when_one_region_is_not_success() -> None:
    defn = onboarding()
    exe, _ = started(defn, id="p")
    drive(process(defn, exe, finished(CREDIT, "success", score=3)), exe)
    drive(process(defn, exe, finished(IDENTITY, "failed")), exe)
    assert (exe.active_path, exe.outcome) == ("Rejected", "rejected")


def test_unknown_child_finished_is_a_no_op() -> None:
    defn = onboarding()
    exe, _ = started(defn, id="p")
    before = exe.model_dump()
    run = drive(process(defn, exe, finished("p:Checks.Identity:7", "success")), exe)
    assert (run.actions, run.effects, exe.model_dump()) == ([], [], before)


def test_reentering_the_fork_spawns_fresh_ids() -> None:
    defn = onboarding(retry=True)
    exe, _ = started(defn, id="p")
    drive(process(defn, exe, finished(IDENTITY, "failed")), exe)
    drive(process(defn, exe, finished(CREDIT, "success")), exe)
    assert (exe.active_path, exe.status) == ("Rejected", Status.RUNNING)
    run = send(defn, exe, "Retry")
    ids = ("p:Checks.Identity:1", "p:Checks.Credit:1")
    assert run.effects == [
        SpawnChildren(((ids[0], "Checks.Identity", {}), (ids[1], "Checks.Credit", {})))
    ]
    assert list(exe.children) == list(ids)
    assert not any(child.finished for child in exe.children.values())
    stale = drive(process(defn, exe, finished(IDENTITY, "success")), exe)  # an old child
    assert (stale.actions, exe.active_path) == ([], "Checks")


def test_join_of_plain_regions_leaves_context_untouched() -> None:
    b = Builder("plain", "O")
    b.state("O", NodeKind.ORTHOGONAL)
    b.state("O.R", NodeKind.REGION, initial="X")
    b.state("O.R.X")
    b.state("Next")
    b.on("", "O", "Next")
    defn = b.build()
    exe, _ = started(defn, id="q")
    drive(process(defn, exe, finished("q:O.R:0", None)), exe)
    assert (exe.active_path, exe.context) == ("Next", {})


def test_choose_on_results() -> None:
    yes, no = Node("Y", "Y", NodeKind.LEAF), Node("N", "N", NodeKind.LEAF)
    exe = Execution(definition_id="m")
    both, some = Chooser("all", yes, no), Chooser("any", yes, no)
    assert choose(both, exe) is no and choose(some, exe) is no
    exe.context["region_results"] = {"a": {"outcome": "success"}, "b": {"outcome": None}}
    assert choose(both, exe) is no and choose(some, exe) is yes
    exe.context["region_results"] = {"a": {"outcome": "success"}}
    assert choose(both, exe) is yes


def test_region_child_runs_its_region_hooks_and_timer() -> None:
    b = Builder("hooks", "O")
    b.state("O", NodeKind.ORTHOGONAL)
    b.state("O.R", NodeKind.REGION, initial="X", enter="r_in", exit="r_out", timeout=30.0)
    b.state("O.R.X", enter="x_in")
    b.state("O.R.Failed", outcome="failed")
    b.on("O.R", "O.R.X", "O.R.Failed", "Timeout")
    b.state("O.R.Done", outcome="ok")
    b.on("O.R", "O.R.X", "O.R.Done", "Go")
    defn = b.build()
    child, run = started(defn, id="c", child_id="c", parent_id="q", root_path="O.R")
    assert run.actions == ["r_in", "x_in"]
    assert run.effects == [ScheduleTimer("O.R", 30.0)]
    run = send(defn, child, "Go")
    assert run.actions == ["r_out"]
    assert run.effects[0] == CancelTimer("O.R")
    assert (child.status, child.outcome) == (Status.DONE, "ok")


def test_region_wide_timeout_resolves_inside_the_region() -> None:
    b = Builder("regional", "O")
    b.state("O", NodeKind.ORTHOGONAL)
    b.state("O.R", NodeKind.REGION, initial="X", timeout=30.0)
    b.state("O.R.X")
    b.state("O.R.Failed", outcome="failed")
    b.on("O.R", "O.R.X", "O.R.Failed", "Timeout")
    defn = b.build()
    child, _ = started(defn, id="c", child_id="c", parent_id="q", root_path="O.R")
    run = drive(process(defn, child, timeout_event("c", "O.R", 30.0)), child)
    assert (child.active_path, child.status, child.outcome) == ("O.R.Failed", Status.DONE, "failed")
    [cancel, emit] = run.effects
    assert cancel == CancelTimer("O.R")
    assert isinstance(emit, EmitEvent) and emit.event.data == {"child_id": "c", "outcome": "failed"}


# --- driving -------------------------------------------------------------------------------------


def test_closing_the_generator_midway_is_safe() -> None:
    defn = parcel()
    exe, _ = started(defn)
    steps = process(defn, exe, Event(kind="Begin"))
    assert isinstance(next(steps), RunAction)
    steps.close()
    with pytest.raises(StopIteration):
        next(steps)


def test_run_to_completion_closes_on_error() -> None:
    defn = parcel()
    exe, _ = started(defn)
    steps = process(defn, exe, Event(kind="Begin"))

    def boom(effect: Effect) -> None:
        raise RuntimeError("action failed")

    with pytest.raises(RuntimeError, match="action failed"):
        run_to_completion(steps, boom)
    with pytest.raises(StopIteration):
        next(steps)


# --- the reference machines through the DSL (engine.md §4.6) -----------------------------------

PARCEL = """
event Begin {}  event Next {}  event Ship {}  event Pause {}
machine parcel {
  initial Idle
  state Idle {}
  state Packing {
    on enter pk_in
    on exit  pk_out
    %s
    initial Wrap
    state Wrap  { on enter wrap }
    state Label { on enter label }
    from Wrap to Label on Next
    from Label to Sent on Ship
  }
  final Sent success { on enter sent }
  from Idle to Packing on Begin
  from Packing to Idle on Pause   // machine-level: applies whatever is active inside Packing
}
"""

ONBOARDING = """
event IdOk {}  event ScoreReady { score: int }  event Retry {}
machine onboarding {
  initial Checks
  orthogonal Checks {
    state Identity { initial Pending  state Pending {}  final Verified success {}
                     from Pending to Verified on IdOk }
    state Credit   { carry score  initial Waiting  state Waiting {}
                     final Scored success { on enter keep_score }
                     from Waiting to Scored on ScoreReady where score >= 600
                     from Waiting to Low on ScoreReady
                     final Low low {} }
  }
  final Accepted success {}
  state Rejected {}
  from Checks join all to Accepted else to Rejected
  from Rejected to Checks on Retry
}
"""


def _labels(*names: str) -> dict[str, Callable[..., Any]]:
    return {name: _noop for name in names}


def dsl_parcel(*, history: bool = True) -> Definition:
    from harel.engine.dsl import definition_from_dsl

    text = PARCEL % ("" if history else "no history")
    return definition_from_dsl(
        text, "parcel", actions=_labels("pk_in", "pk_out", "wrap", "label", "sent")
    )


def test_dsl_parcel_and_history() -> None:
    defn = dsl_parcel()
    exe, _ = started(defn)
    assert [send(defn, exe, k).actions for k in ("Begin", "Next", "Pause", "Begin")] == [
        ["pk_in", "wrap"],
        ["label"],
        ["pk_out"],
        ["pk_in", "label"],
    ]
    assert send(defn, exe, "Ship").actions == ["pk_out", "sent"]
    assert (exe.active_path, exe.status, exe.outcome) == ("Sent", Status.DONE, "success")


def test_dsl_parcel_no_history() -> None:
    defn = dsl_parcel(history=False)
    exe, _ = started(defn)
    for kind in ("Begin", "Next", "Pause"):
        send(defn, exe, kind)
    assert send(defn, exe, "Begin").actions == ["pk_in", "wrap"]
    assert exe.active_path == "Packing.Wrap"


def test_dsl_invoice_and_timeout_context() -> None:
    from harel.engine.dsl import definition_from_dsl

    text = """
    event Paid {}
    machine invoice {
      initial Open
      state Open { on enter plan  timeout context backoff }
      final Settled success {}
      final Expired expired {}
      from Open to Settled on Paid
      from Open to Expired on Timeout
    }
    """

    def plan(stm: Any, event: Any, **_: Any) -> None:
        stm.execution_ctx["backoff"] = 60

    defn = definition_from_dsl(text, actions={"plan": plan})
    exe, run = started(defn)
    assert run.effects == [ScheduleTimer("Open", 60.0)]
    drive(process(defn, exe, timeout_event(exe.id, "Open", 560.0)), exe)
    assert (exe.active_path, exe.outcome) == ("Expired", "expired")


class World:
    """Plays the relay in memory: spawns children, broadcasts, delivers ``Finished``."""

    def __init__(self, defn: Definition) -> None:
        self.defn = defn
        self.rows: dict[str, Execution] = {}
        self.joins: list[list[str]] = []

    def create(self, exe_id: str) -> Execution:
        exe = new(self.defn, id=exe_id)
        self.rows[exe_id] = exe
        self._settle(exe, drive(start(self.defn, exe), exe))
        return exe

    def send(self, exe_id: str, event: Event) -> None:
        exe = self.rows[exe_id]
        live = [cid for cid, child in exe.children.items() if not child.finished]
        for target in live if live and is_domain_event(event) else [exe_id]:
            row = self.rows[target]
            self._settle(row, drive(process(self.defn, row, event), row))

    def _settle(self, exe: Execution, run: Run) -> None:
        if "join all" in run.actions:
            self.joins.append(run.actions)
        for effect in run.effects:
            if isinstance(effect, SpawnChildren):
                for cid, root_path, context in effect.children:
                    child = new(
                        self.defn,
                        id=cid,
                        child_id=cid,
                        parent_id=exe.id,
                        root_path=root_path,
                        context=context,
                    )
                    self.rows[cid] = child
                    self._settle(child, drive(start(self.defn, child), child))
            elif isinstance(effect, EmitEvent):
                assert effect.to is not None
                self.send(effect.to, effect.event)


def dsl_onboarding() -> Definition:
    from harel.engine.dsl import definition_from_dsl

    return definition_from_dsl(ONBOARDING, "onboarding", actions={"keep_score": keep_score})


def test_dsl_onboarding_join_all_accepts() -> None:
    world = World(dsl_onboarding())
    parent = world.create("p")
    assert sorted(world.rows) == ["p", CREDIT, IDENTITY]
    assert world.rows[CREDIT].active_path == "Checks.Credit.Waiting"
    assert world.rows[CREDIT].context == {}
    world.send("p", Event(kind="IdOk"))
    assert parent.active_path == "Checks" and parent.children[IDENTITY].finished
    world.send("p", Event(kind="ScoreReady", data={"score": 700}))
    assert parent.context["region_results"] == {
        "Checks.Identity": {"outcome": "success"},
        "Checks.Credit": {"outcome": "success", "score": 700},
    }
    assert (parent.active_path, parent.status, parent.outcome) == (
        "Accepted",
        Status.DONE,
        "success",
    )
    assert world.joins == [["join all"]]


def test_dsl_onboarding_rejects_then_retries_with_fresh_children() -> None:
    world = World(dsl_onboarding())
    parent = world.create("p")
    world.send("p", Event(kind="ScoreReady", data={"score": 100}))  # guard false -> Low
    world.send("p", Event(kind="IdOk"))
    assert parent.context["region_results"]["Checks.Credit"] == {"outcome": "low"}
    assert (parent.active_path, parent.status) == ("Rejected", Status.RUNNING)
    world.send("p", Event(kind="Retry"))
    assert list(parent.children) == ["p:Checks.Identity:1", "p:Checks.Credit:1"]
    assert world.rows["p:Checks.Credit:1"].active_path == "Checks.Credit.Waiting"


def test_orthogonal_own_timeout_leaves_the_fork_early() -> None:
    b = Builder("budget", "O")
    b.state("O", NodeKind.ORTHOGONAL, timeout=90.0)
    b.state("O.R", NodeKind.REGION, initial="X")
    b.state("O.R.X")
    b.state("Late", outcome="late")
    b.on("", "O", "Late", "Timeout")
    defn = b.build()
    exe, run = started(defn, id="q")
    assert run.effects[0] == ScheduleTimer("O", 90.0)
    run = drive(process(defn, exe, timeout_event("q", "O", 90.0)), exe)
    assert run.effects == [CancelTimer("O")]
    assert (exe.active_path, exe.outcome, exe.invoke_seq) == ("Late", "late", {"O": 1})


def test_quoted_deep_source_written_in_an_outer_block_fires() -> None:
    from harel.engine.dsl import definition_from_dsl

    defn = definition_from_dsl(
        "event Go {} machine m { initial Outer"
        "  state Outer { initial In1  state In1 { initial Deep  state Deep {} } }"
        '  state X {}  from "Outer.In1.Deep" to X on Go }',
        "m",
    )
    exe = Execution(definition_id="m")
    drive(start(defn, exe), exe)
    assert exe.active_path == "Outer.In1.Deep"
    drive(process(defn, exe, Event(kind="Go")), exe)
    assert exe.active_path == "X"


# --- the quiet-move fast path (memoised navigation) ------------------------------------------


def _hookless() -> Definition:
    b = Builder("quiet", "Idle")
    b.state("Idle")
    b.state("Work", NodeKind.COMPOSITE, initial="A")
    b.state("Work.A")
    b.state("Work.B")
    b.state("Work.Deep", NodeKind.COMPOSITE, initial="X", history=False)
    b.state("Work.Deep.X")
    b.state("Timed", timeout=5.0)
    b.state("End", outcome="done")
    b.on("", "Idle", "Work.A", "Go")
    b.on("Work", "Work.A", "Work.B", "Next", where=lambda data: data.get("ok") is True)
    b.on("Work", "Work.B", "Work.Deep.X", "Next")
    b.on("Work.Deep", "Work.Deep.X", "Work.Deep.X", "Again")
    b.on("", "Work", "Idle", "Out")
    b.on("", "Idle", "Timed", "Wait")
    b.on("", "Timed", "Idle", "Out")
    b.on("", "Idle", "End", "Stop")
    return b.build()


QUIET_SCRIPT = [
    ("Go", {}),
    ("Next", {}),  # guarded out: no move
    ("Next", {"ok": True}),
    ("Next", {}),
    ("Again", {}),
    ("Out", {}),
    ("Go", {}),
    ("Out", {}),
    ("Wait", {}),  # a timer: the general path
    ("Out", {}),
    ("Stop", {}),  # a sink: the general path ends the run
]


def _play(defn: Definition) -> tuple[list[str], list[list[Effect]]]:
    exe, _ = started(defn, id="q")
    documents, effects = [], []
    for kind, data in QUIET_SCRIPT:
        run = send(defn, exe, kind, **data)
        documents.append(exe.model_dump_json())  # key order of ``history`` included
        effects.append(run.effects)
    return documents, effects


def test_quiet_moves_write_exactly_what_take_and_settle_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast = _play(_hookless())
    from harel.engine._navigation import Navigation

    monkeypatch.setattr(Navigation, "quiet_move", lambda self, *args: None)
    general = _play(_hookless())
    assert fast == general
    documents, effects = fast
    assert '"active_path":"Work.Deep.X"' in documents[4] and '"status":"DONE"' in documents[-1]
    assert effects[8] == [ScheduleTimer("Timed", 5.0)] and effects[9] == [CancelTimer("Timed")]


def test_quiet_move_is_refused_when_anything_would_be_yielded() -> None:
    defn = _hookless()
    nav, root = navigation_of(defn), defn.root

    def move(source: str, kind: str, **data: Any) -> Any:
        active = defn.node(source)
        transition = nav.find_event_transition(active, root, Event(kind=kind, data=data))
        assert transition is not None
        return nav.quiet_move(active, transition, root)

    assert move("Work.A", "Next", ok=True) is not None
    assert move("Idle", "Wait") is None  # the target arms a timer
    assert move("Idle", "Stop") is None  # the target is a sink: the run ends
    assert move("Work.A", "Next", ok=True) is move("Work.A", "Next", ok=True)  # memoised
    hooked = parcel()
    active = hooked.node("Packing.Wrap")
    transition = navigation_of(hooked).find_event_transition(
        active, hooked.root, Event(kind="Next")
    )
    assert transition is not None
    assert navigation_of(hooked).quiet_move(active, transition, hooked.root) is None  # enter hook
