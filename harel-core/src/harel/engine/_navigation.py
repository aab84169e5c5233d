"""Pure lookups over a Definition: which transition a trigger fires, and the exit/enter lists.

Nothing here mutates an execution or yields effects (engine.md §3.3, §3.4).
"""

from __future__ import annotations

from harel.engine.definition import Node, Transition, Trigger
from harel.model import Event


class EngineError(Exception):
    """The engine met a state it cannot run (a definition/execution mismatch or bad data)."""


def trigger_matches(trigger: Trigger, event: Event) -> bool:
    """True when ``event.kind`` is one of the trigger's kinds and its predicate (if any) holds.

    A predicate that trips over a missing field or an incomparable value (``KeyError``,
    ``TypeError``) counts as false, never as an error.
    """
    if event.kind not in trigger.kinds:
        return False
    if trigger.predicate is None:
        return True
    try:
        return bool(trigger.predicate(event.data))
    except (KeyError, TypeError):
        return False


def chain_to_root(node: Node, root: Node) -> list[Node]:
    """``node`` and its ancestors up to and including ``root``, innermost first.

    Raises :class:`EngineError` if ``root`` is not ``node`` or one of its ancestors.
    """
    chain = [node]
    while chain[-1] is not root:
        parent = chain[-1].parent
        if parent is None:
            raise EngineError(f"state {node.path!r} is not inside the execution root {root.path!r}")
        chain.append(parent)
    return chain


def find_event_transition(start: Node, root: Node, event: Event) -> Transition | None:
    """The transition ``event`` fires, looking outward from ``start`` but never above ``root``.

    At each level the source must be the node itself (its transitions, innermost scope
    first, see :meth:`Node.outgoing`); the first match wins, so inner transitions shadow
    outer ones.
    """
    node = start
    while node is not root and node.parent is not None:
        for transition in node.outgoing():
            if transition.trigger is not None and trigger_matches(transition.trigger, event):
                return transition
        node = node.parent
    return None


def find_automatic_transition(active: Node, root: Node) -> Transition | None:
    """The first automatic transition whose source is ``active`` itself (its completion)."""
    if active is root or active.parent is None:
        return None
    for transition in active.outgoing():
        if transition.trigger is None:
            return transition
    return None


def waits(active: Node, root: Node) -> bool:
    """True when ``active`` has any outgoing transition; otherwise it is a sink (terminal)."""
    if active is root or active.parent is None:
        return False
    return bool(active.outgoing())


def transition_path(active: Node, target: Node, root: Node) -> tuple[list[Node], list[Node]]:
    """The nodes to exit (innermost first) and to enter (outermost first) to reach ``target``.

    The pivot is the deepest node that is ``active`` or one of its ancestors and a strict
    ancestor of ``target``: a target above the active node is exited and re-entered, a target
    below it keeps it. A target equal to the execution root re-descends without leaving it.
    A self-transition (``target is active``) exits and enters nothing.
    """
    if target is active:
        return [], []
    target_chain = chain_to_root(target, root)
    if target is root:
        pivot = root
    else:
        strict_ancestors = target_chain[1:]
        pivot = next(node for node in chain_to_root(active, root) if node in strict_ancestors)
    exits: list[Node] = []
    node = active
    while node is not pivot:
        exits.append(node)
        assert node.parent is not None  # the pivot is an ancestor of active
        node = node.parent
    enters = list(reversed(target_chain[: target_chain.index(pivot)]))
    return exits, enters
