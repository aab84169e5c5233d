"""Pure lookups over a Definition: which transition a trigger fires, and the exit/enter lists.

Nothing here mutates an execution or yields effects (engine.md §3.3, §3.4).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

from harel.engine.definition import Definition, Node, NodeKind, Transition, Trigger
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


@dataclass(frozen=True, slots=True)
class QuietMove:
    """A transition whose taking and settling yields no effect: every exited and entered node
    has no hook and no timer, nothing exited is orthogonal, there is no chooser, and the
    target is a leaf that waits (it has an event transition and no automatic one).

    Taking it is exactly these ``history[key] = value`` writes, in order (so the history's
    key order is the general path's too), and ``active_path = final`` (``None``: unchanged).
    """

    history: tuple[tuple[str, str], ...]
    final: str | None


class Navigation:
    """The lookups above, memoised for one definition (a definition never changes once built).

    Each answer is computed once per node (pair, triple) with the plain functions above, so it
    is exactly theirs; only the matching of an event against candidate triggers (their
    predicates read ``event.data``) runs on every call.  Lookups that raise are not memoised.
    """

    __slots__ = ("_events", "_paths", "_quiet", "_settle")

    def __init__(self) -> None:
        self._events: dict[tuple[Node, Node], dict[str, tuple[Transition, ...]]] = {}
        self._paths: dict[tuple[Node, Node, Node], tuple[tuple[Node, ...], tuple[Node, ...]]] = {}
        self._settle: dict[tuple[Node, Node], tuple[Transition | None, bool]] = {}
        self._quiet: dict[tuple[Node, Transition, Node], QuietMove | None] = {}

    def find_event_transition(self, start: Node, root: Node, event: Event) -> Transition | None:
        """:func:`find_event_transition`: the first candidate for ``event.kind`` that matches."""
        key = (start, root)
        table = self._events.get(key)
        if table is None:
            table = self._events[key] = _event_table(start, root)
        for transition in table.get(event.kind, ()):
            trigger = transition.trigger
            assert trigger is not None  # the table holds triggered transitions only
            if trigger.predicate is None or trigger_matches(trigger, event):
                return transition
        return None

    def settle_step(self, active: Node, root: Node) -> tuple[Transition | None, bool]:
        """``(find_automatic_transition(active, root), waits(active, root))``."""
        key = (active, root)
        found = self._settle.get(key)
        if found is None:
            found = self._settle[key] = (
                find_automatic_transition(active, root),
                waits(active, root),
            )
        return found

    def quiet_move(self, active: Node, transition: Transition, root: Node) -> QuietMove | None:
        """What taking ``transition`` from ``active`` and settling writes, when that yields no
        effect at all; ``None`` when it may (see :class:`QuietMove`)."""
        key = (active, transition, root)
        if key in self._quiet:
            return self._quiet[key]
        found = self._quiet[key] = self._quiet_move(active, transition, root)
        return found

    def _quiet_move(self, active: Node, transition: Transition, root: Node) -> QuietMove | None:
        target = transition.target
        if transition.chooser is not None or target is None or target.kind is not NodeKind.LEAF:
            return None
        exits, enters = self.transition_path(active, target, root)
        if any(
            node.on_exit is not None or node.timeout is not None or node.kind is NodeKind.ORTHOGONAL
            for node in exits
        ) or any(node.on_enter is not None or node.timeout is not None for node in enters):
            return None
        automatic, waiting = self.settle_step(target, root)
        if automatic is not None or not waiting:
            return None  # the target moves on or ends the run: the general path does that
        writes: list[tuple[str, str]] = []
        final: str | None = None
        for node in exits:
            assert node.parent is not None  # exits stop below the execution root
            writes.append((node.parent.path, node.path))
            final = node.parent.path
        for node in enters:
            assert node.parent is not None
            writes.append((node.parent.path, node.path))
            final = node.path
        return QuietMove(tuple(writes), final)

    def transition_path(
        self, active: Node, target: Node, root: Node
    ) -> tuple[tuple[Node, ...], tuple[Node, ...]]:
        """:func:`transition_path` as tuples (raises, unmemoised, like it)."""
        key = (active, target, root)
        found = self._paths.get(key)
        if found is None:
            exits, enters = transition_path(active, target, root)
            found = self._paths[key] = (tuple(exits), tuple(enters))
        return found


def _event_table(start: Node, root: Node) -> dict[str, tuple[Transition, ...]]:
    """Per event kind, the triggered transitions :func:`find_event_transition` would try for
    it from ``start``, in the order it tries them."""
    table: dict[str, list[Transition]] = {}
    node = start
    while node is not root and node.parent is not None:
        for transition in node.outgoing():
            if transition.trigger is not None:
                for kind in transition.trigger.kinds:
                    table.setdefault(kind, []).append(transition)
        node = node.parent
    return {kind: tuple(found) for kind, found in table.items()}


_MEMOS: weakref.WeakKeyDictionary[Definition, Navigation] = weakref.WeakKeyDictionary()
_MEMOS_LOCK = threading.Lock()


def navigation_of(defn: Definition) -> Navigation:
    """The memoised lookups of ``defn`` (one :class:`Navigation` per definition object, dropped
    with it)."""
    found = _MEMOS.get(defn)
    if found is None:
        with _MEMOS_LOCK:
            found = _MEMOS.setdefault(defn, Navigation())
    return found
