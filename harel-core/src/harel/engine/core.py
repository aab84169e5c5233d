"""The pure statechart engine (engine.md §3): ``start`` and ``process`` as effect generators.

Both functions mutate the :class:`~harel.model.Execution` in place and yield the effects of
:mod:`harel.engine.effects`.  :class:`RunAction` and :class:`RunChooser` block: the driver
calls the action (or :func:`choose`) and sends the result back (the chosen target node for a
chooser; anything for an action).  The other effects are deferred: the driver records them
for the commit and sends ``None``.  The engine never calls user code, reads a clock or
touches a store, and closing a generator at any yield (``gen.close()``) is safe: it leaves
the execution half-stepped, which is fine because the driver then discards it.

Reserved kinds: ``Finished`` and ``Timeout`` are handled here.  ``Start``, ``Cancel``,
``Reset``, ``SetState`` and ``Returned`` are reserved for later control-plane features: passed
to :func:`process` they change nothing at all (no transition, no counter), so a delivered one
commits as a no-op.  They are not domain events, so runners never broadcast them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Generator
from typing import Any

from harel.engine._navigation import (
    EngineError,
    chain_to_root,
    navigation_of,
)
from harel.engine.definition import Chooser, Definition, Node, NodeKind, Transition
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

__all__ = [
    "RESERVED_KINDS",
    "EngineError",
    "Steps",
    "choose",
    "is_domain_event",
    "is_stale_timeout",
    "process",
    "run_to_completion",
    "start",
    "timeout_event",
    "timeout_event_id",
]

Steps = Generator[Effect, Any, None]
"""What :func:`start` and :func:`process` return: effects out, answers in, nothing at the end."""

RESERVED_KINDS: frozenset[str] = frozenset(
    {"Start", "Finished", "Timeout", "Cancel", "Reset", "SetState", "Returned"}
)
"""Event kinds owned by the engine; every other kind is a domain event."""

FINISHED = "Finished"
TIMEOUT = "Timeout"
REGION_RESULTS = "region_results"


def is_domain_event(event: Event) -> bool:
    """True for user events (broadcast to live regions); false for every reserved kind."""
    return event.kind not in RESERVED_KINDS


def timeout_event_id(execution_id: str, path: str, fire_at: float) -> str:
    """The deterministic dedupe id of a timer's ``Timeout``: ``timeout:<id>:<path>:<fire_at>``.

    ``fire_at`` is printed with ``str(float)``, so ``560`` and ``560.0`` give the same id.
    """
    return f"timeout:{execution_id}:{path}:{float(fire_at)}"


def timeout_event(execution_id: str, path: str, fire_at: float) -> Event:
    """The ``Timeout`` event the timer sweep delivers for the timer ``(execution_id, path)``.

    ``data`` holds the timed state's ``path`` and the due entry's ``fire_at`` (a float).
    """
    return Event(
        id=timeout_event_id(execution_id, path, fire_at),
        kind=TIMEOUT,
        data={"path": path, "fire_at": float(fire_at)},
    )


def is_stale_timeout(exe: Execution, event: Event) -> bool:
    """Whether a ``Timeout`` is for an earlier arming than the one ``exe`` has armed now.

    True only when the event carries a numeric ``fire_at`` and ``exe.armed_timers`` records
    a later ``fire_at`` for the same path (the state was left and re-entered since the due
    entry was read).  An execution with no record (stored by an older release) is not stale.
    """
    path, fire_at = event.data.get("path"), event.data.get("fire_at")
    if not isinstance(path, str) or isinstance(fire_at, bool):
        return False
    if not isinstance(fire_at, int | float):
        return False
    armed = exe.armed_timers.get(path)
    return armed is not None and fire_at < armed


def choose(chooser: Chooser, exe: Execution) -> Node:
    """Answer a :class:`RunChooser` for the built-in ``join all|any`` selector.

    Reads ``exe.context["region_results"]``: ``when_true`` if all (``any``: at least one)
    region outcomes equal ``"success"``, else ``otherwise``; no results -> ``otherwise``.
    """
    results = exe.context.get(REGION_RESULTS)
    if not isinstance(results, dict) or not results:
        return chooser.otherwise
    verdicts = [
        isinstance(entry, dict) and entry.get("outcome") == "success" for entry in results.values()
    ]
    hit = all(verdicts) if chooser.mode == "all" else any(verdicts)
    return chooser.when_true if hit else chooser.otherwise


def run_to_completion(steps: Steps, on_effect: Callable[[Effect], Any]) -> None:
    """Drive ``steps`` to the end, sending back ``on_effect(effect)`` for every effect.

    A small pure helper (tests, tools); the runners have their own drivers.  If ``on_effect``
    raises, the generator is closed and the exception propagates.
    """
    try:
        effect = next(steps)
        while True:
            effect = steps.send(on_effect(effect))
    except StopIteration:
        return
    finally:
        steps.close()


# --- entry points -----------------------------------------------------------------------


def start(defn: Definition, exe: Execution) -> Steps:
    """Start a fresh (PENDING) execution: RUNNING, enter its root's initial state, settle.

    A region child (``exe.root_path != ""``) first runs its region's own enter hook and
    timer.  Raises :class:`EngineError` if the execution was already started.
    """
    if exe.status is not Status.PENDING:
        raise EngineError(f"execution {exe.id!r} is {exe.status.value}, only PENDING can start")
    root = _root(defn, exe)
    exe.status = Status.RUNNING
    if root is not defn.root:
        yield from _enter(exe, root, None)
    exe.active_path = root.path
    yield from _descend(defn, exe, root, None)
    yield from _settle(defn, exe)


def process(defn: Definition, exe: Execution, event: Event) -> Steps:
    """Apply one event to ``exe`` (engine.md §3.6).

    Domain events are ignored unless RUNNING; ``Timeout`` passes the staleness guard first;
    ``Finished`` updates the join ledger and settles.  Other reserved kinds change nothing.
    """
    if event.kind == FINISHED:
        yield from _on_finished(defn, exe, event)
    elif event.kind == TIMEOUT:
        yield from _on_timeout(defn, exe, event)
    elif is_domain_event(event):
        yield from _on_domain(defn, exe, event)


# --- per kind ---------------------------------------------------------------------------


def _on_domain(defn: Definition, exe: Execution, event: Event) -> Steps:
    if exe.status is not Status.RUNNING:
        return
    exe.processed_events += 1
    navigation, active, root = navigation_of(defn), _active(defn, exe), _root(defn, exe)
    transition = navigation.find_event_transition(active, root, event)
    if transition is None:
        return
    quiet = navigation.quiet_move(active, transition, root)
    if quiet is not None:  # no hook, timer, chooser or fork: what _take and _settle would do
        history = exe.history
        for key, path in quiet.history:
            history[key] = path
        if quiet.final is not None:
            exe.active_path = quiet.final
        return
    yield from _take(defn, exe, transition, event)
    yield from _settle(defn, exe)


def _on_timeout(defn: Definition, exe: Execution, event: Event) -> Steps:
    path = event.data.get("path")
    if exe.status is not Status.RUNNING or not isinstance(path, str):
        return
    root = _root(defn, exe)
    active = _active(defn, exe)
    timed = next((node for node in chain_to_root(active, root) if node.path == path), None)
    if timed is None or is_stale_timeout(exe, event):
        return  # stale: the timed state is no longer active, or was re-armed since
    exe.processed_events += 1
    # A region-wide timer (the timed node is the execution root) resolves from the active
    # node like any event; otherwise resolution is anchored at the timed node.
    anchor = active if timed is root else timed
    transition = navigation_of(defn).find_event_transition(anchor, root, event)
    if transition is not None:
        yield from _take(defn, exe, transition, event)
        yield from _settle(defn, exe)


def _on_finished(defn: Definition, exe: Execution, event: Event) -> Steps:
    child_id = event.data.get("child_id")
    if not isinstance(child_id, str) or child_id not in exe.children:
        return
    result = {k: v for k, v in event.data.items() if k not in ("child_id", "outcome")}
    exe.children[child_id] = exe.children[child_id].model_copy(
        update={"finished": True, "outcome": event.data.get("outcome"), "result": result}
    )
    if exe.status is Status.RUNNING:
        yield from _settle(defn, exe)


# --- hooks and moves --------------------------------------------------------------------


def _enter(exe: Execution, node: Node, event: Event | None) -> Steps:
    """Run ``node``'s enter hook, then arm its timer (delay read after the hook ran)."""
    if node.on_enter is not None:
        yield RunAction(node, "enter", node.on_enter, event)
    if node.timeout is not None:
        yield ScheduleTimer(node.path, _timeout_delay(exe, node))


def _exit(node: Node, event: Event | None) -> Steps:
    """Run ``node``'s exit hook, then disarm its timer."""
    if node.on_exit is not None:
        yield RunAction(node, "exit", node.on_exit, event)
    if node.timeout is not None:
        yield CancelTimer(node.path)


def _timeout_delay(exe: Execution, node: Node) -> float:
    spec = node.timeout
    if not isinstance(spec, tuple):
        return float(spec or 0)
    key = spec[1]
    raw = exe.context.get(key, 0)
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise EngineError(
            f"state {node.path!r} has 'timeout context {key}' but context[{key!r}] = {raw!r} "
            "is not a number; store seconds as an int or float"
        ) from None


def _take(defn: Definition, exe: Execution, transition: Transition, event: Event | None) -> Steps:
    """Move from the active node to the transition's target (asking the driver for a chooser)."""
    target = transition.target
    if transition.chooser is not None:
        target = yield RunChooser(transition.source, transition.chooser, event)
        if not isinstance(target, Node):
            raise EngineError(
                f"a RunChooser for {transition.source.path!r} must be answered with a Node "
                f"(use harel.engine.core.choose), got {target!r}"
            )
    if target is None:
        raise EngineError(f"transition from {transition.source.path!r} has no target")
    root = _root(defn, exe)
    exits, enters = navigation_of(defn).transition_path(_active(defn, exe), target, root)
    history = exe.history
    for node in exits:
        if node.on_exit is not None or node.timeout is not None:
            yield from _exit(node, event)
        parent = node.parent
        assert parent is not None  # exits stop below the execution root
        history[parent.path] = node.path
        if node.kind is NodeKind.ORTHOGONAL:
            exe.invoke_seq[node.path] = exe.invoke_seq.get(node.path, 0) + 1
        exe.active_path = parent.path
    for node in enters:
        if node.on_enter is not None or node.timeout is not None:
            yield from _enter(exe, node, event)
        exe.active_path = node.path
        parent = node.parent
        assert parent is not None
        history[parent.path] = node.path
    if (enters or target is root) and target.kind is not NodeKind.LEAF:
        yield from _descend(defn, exe, target, event)  # a leaf has nothing to descend into


def _descend(defn: Definition, exe: Execution, node: Node, event: Event | None) -> Steps:
    """Enter initial (or remembered) children below ``node``; fork at an orthogonal node."""
    while True:
        if node.kind is NodeKind.ORTHOGONAL:
            yield from _fork(exe, node)
            return
        if not node.is_composite:
            return
        if not node.history:
            exe.history.pop(node.path, None)
        child = _remembered_child(defn, exe, node) or _initial_child(node)
        yield from _enter(exe, child, event)
        exe.active_path = child.path
        exe.history[node.path] = child.path
        node = child


def _remembered_child(defn: Definition, exe: Execution, node: Node) -> Node | None:
    path = exe.history.get(node.path)
    child = defn.index.get(path) if path is not None else None
    return child if child is not None and child.parent is node else None


def _initial_child(node: Node) -> Node:
    child = node.child(node.initial) if node.initial is not None else None
    if child is None:
        raise EngineError(f"state {node.path!r} has no valid initial child ({node.initial!r})")
    return child


def _fork(exe: Execution, node: Node) -> Steps:
    """Replace the join ledger with one fresh child per region and yield one spawn."""
    seq = exe.invoke_seq.get(node.path, 0)
    exe.children = {
        f"{exe.id}:{region.path}:{seq}": ChildState(root_path=region.path, key=region.path)
        for region in node.children
    }
    if exe.children:
        yield SpawnChildren(tuple((cid, cs.root_path, {}) for cid, cs in exe.children.items()))


# --- settling ---------------------------------------------------------------------------


def _settle(defn: Definition, exe: Execution) -> Steps:
    """Run automatic moves and sinks until the active node waits, parks or the run ends."""
    root = _root(defn, exe)
    navigation = navigation_of(defn)
    pending: str | None = None
    while True:
        active = _active(defn, exe)
        if active.kind is NodeKind.ORTHOGONAL:
            if not all(child.finished for child in exe.children.values()):
                return  # parked until every region has finished
            _write_region_results(exe)
        automatic, waiting = navigation.settle_step(active, root)
        if automatic is not None:
            pending = None  # only the terminal the run actually ends in gives the outcome
            yield from _take(defn, exe, automatic, None)
            continue
        if waiting:
            return
        if pending is None:
            pending = active.outcome
        yield from _exit(active, None)
        parent = active.parent
        if parent is not None and parent is not root:
            exe.history.pop(parent.path, None)
            exe.active_path = parent.path
            continue
        yield from _end(defn, exe, root, pending)
        return


def _end(defn: Definition, exe: Execution, root: Node, outcome: str | None) -> Steps:
    """Finish the execution; a region child also leaves its region and reports ``Finished``."""
    is_region_child = root is not defn.root
    if is_region_child:
        yield from _exit(root, None)
    exe.status = Status.DONE
    exe.outcome = outcome
    if is_region_child:
        carried = {k: copy.deepcopy(exe.context[k]) for k in root.carry if k in exe.context}
        data = {"child_id": exe.child_id, "outcome": outcome, **carried}
        yield EmitEvent(Event(kind=FINISHED, data=data), exe.parent_id)


def _write_region_results(exe: Execution) -> None:
    children = exe.children.values()
    if not any(child.outcome is not None or child.result for child in children):
        return  # a join of plain regions leaves the context untouched
    exe.context[REGION_RESULTS] = {
        (child.key or child.root_path): {"outcome": child.outcome, **child.result}
        for child in children
    }


def _root(defn: Definition, exe: Execution) -> Node:
    return defn.node(exe.root_path)


def _active(defn: Definition, exe: Execution) -> Node:
    if exe.active_path is None:
        raise EngineError(f"execution {exe.id!r} is RUNNING but has no active state")
    return defn.node(exe.active_path)
