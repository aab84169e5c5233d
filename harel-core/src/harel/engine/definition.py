"""The immutable definition tree a statechart runs: nodes, transitions, triggers, actions.

Built by :mod:`harel.engine.dsl`; read by the pure engine.  Paths are addresses only
(``"Packing.Wrap"``; the root's path is ``""``); navigation uses node references.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal


class NodeKind(StrEnum):
    """What a node is: a leaf, a composite (the root is one), an orthogonal node or a region."""

    LEAF = "leaf"
    COMPOSITE = "composite"
    ORTHOGONAL = "orthogonal"
    REGION = "region"


@dataclass(frozen=True, eq=False)
class ActionRef:
    """A hook bound to a callable; ``label`` is the name as written in the DSL (trace label).

    ``target`` is the callable, or a dotted ``module.attr`` string resolved at call time.
    ``inputs`` are the literal keyword arguments written in the DSL.
    """

    label: str
    target: Callable[..., Any] | str
    inputs: dict[str, Any] = field(default_factory=dict)


Predicate = Callable[[dict[str, Any]], bool]
"""A guard over ``event.data``; a field the event does not carry makes it false."""


@dataclass(frozen=True, eq=False)
class Trigger:
    """Which events fire a transition: any of ``kinds``, and ``predicate`` (if any) true."""

    kinds: frozenset[str]
    predicate: Predicate | None = None
    predicate_text: str | None = None


@dataclass(frozen=True, eq=False)
class Chooser:
    """The built-in ``join all|any`` selector: picks ``when_true`` or ``otherwise``."""

    mode: Literal["all", "any"]
    when_true: Node
    otherwise: Node

    @property
    def label(self) -> str:
        """The trace label, ``"join all"`` or ``"join any"``."""
        return f"join {self.mode}"


@dataclass(frozen=True, eq=False)
class Transition:
    """A transition owned by a scope node; ``trigger is None`` means automatic.

    Exactly one of ``target`` and ``chooser`` is set.
    """

    source: Node
    target: Node | None
    trigger: Trigger | None = None
    chooser: Chooser | None = None


TimeoutSpec = float | tuple[Literal["context"], str]
"""Seconds, or ``("context", key)``: the delay is read from the context after on-enter."""


@dataclass(eq=False)
class Node:
    """One state.  Mutable only while the builder assembles it; treat as frozen afterwards."""

    name: str
    path: str
    kind: NodeKind
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    initial: str | None = None
    on_enter: ActionRef | None = None
    on_exit: ActionRef | None = None
    timeout: TimeoutSpec | None = None
    outcome: str | None = None
    carry: tuple[str, ...] = ()
    history: bool = True
    transitions: list[Transition] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"Node({self.path or '<root>'!r}, {self.kind.value})"

    def child(self, name: str) -> Node | None:
        """The direct child called ``name``."""
        for node in self.children:
            if node.name == name:
                return node
        return None

    @property
    def is_composite(self) -> bool:
        """Composites and regions descend to an initial child; orthogonal nodes fork."""
        return self.kind in (NodeKind.COMPOSITE, NodeKind.REGION)

    def ancestors(self) -> list[Node]:
        """Parents from the nearest to the root."""
        chain = []
        node = self.parent
        while node is not None:
            chain.append(node)
            node = node.parent
        return chain

    def outgoing(self) -> list[Transition]:
        """Transitions whose source is this node: innermost scope first, then declaration order.

        Usually they all live in ``parent.transitions``; a quoted deep source written in an
        outer block (``from "Packing.Wrap" to Idle on Stop`` in the machine body) lives in
        that outer scope's ``transitions``.
        """
        return [t for scope in self.ancestors() for t in scope.transitions if t.source is self]


@dataclass(frozen=True)
class FieldSpec:
    """A declared event field: its type name and whether it may be absent."""

    type: str
    optional: bool = False


@dataclass(frozen=True, eq=False)
class Definition:
    """A compiled machine: ``id`` is the machine name, ``index`` maps every path to its node.

    Immutable once built: the engine memoises its lookups over the tree per definition
    (``harel.engine._navigation.navigation_of``), so nodes and transitions must not be changed
    after the definition is created.
    """

    id: str
    root: Node
    index: dict[str, Node]
    events: dict[str, dict[str, FieldSpec]] = field(default_factory=dict)

    def node(self, path: str) -> Node:
        """The node at ``path``; ``KeyError`` naming the path when it does not exist."""
        try:
            return self.index[path]
        except KeyError:
            raise KeyError(f"definition {self.id!r} has no state {path!r}") from None
