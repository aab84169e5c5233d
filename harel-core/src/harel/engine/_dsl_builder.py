"""Builds a :class:`Definition` from a parsed machine and enforces engine.md §4.3-4.4.

Nodes are created first (kinds, paths, hooks, timers, ``initial``), then transitions are
resolved in declaration order: the enclosing block is the scope; the source is found by
descending from the scope, the target by descending from the scope and then from each
enclosing block outward (innermost match first).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from harel.engine._dsl_lexer import Source, Token
from harel.engine._dsl_parser import (
    ActionDecl,
    Compare,
    Guard,
    Item,
    MachineDecl,
    Program,
    Ref,
    StateItem,
    TransitionItem,
)
from harel.engine.definition import (
    ActionRef,
    Chooser,
    Definition,
    Node,
    NodeKind,
    Predicate,
    Transition,
    Trigger,
)

Actions = Mapping[str, Callable[..., Any] | str]
Body = list[Item | TransitionItem | StateItem]
_MISSING = object()


def build(source: Source, program: Program, machine: MachineDecl, actions: Actions) -> Definition:
    """Compile one machine of ``program``; raises :class:`DslError` on any structural error."""
    return _Builder(source, actions).machine(program, machine)


def compile_guard(guard: Guard) -> Predicate:
    """A predicate over ``event.data``: a missing field or incomparable types make it false."""
    if isinstance(guard, Compare):
        path, op, expected = guard.field, guard.op, guard.value

        def compare(data: dict[str, Any]) -> bool:
            value: Any = data
            for key in path:
                if not isinstance(value, dict) or key not in value:
                    return False
                value = value[key]
            return _compare(op, value, expected)

        return compare
    parts = [compile_guard(part) for part in guard.parts]
    if guard.op == "not":
        return lambda data: not parts[0](data)
    if guard.op == "and":
        return lambda data: all(part(data) for part in parts)
    return lambda data: any(part(data) for part in parts)


def _compare(op: str, left: Any, right: Any) -> bool:
    try:
        if op == "==":
            return bool(left == right)
        if op == "!=":
            return bool(left != right)
        if op == "<":
            return bool(left < right)
        if op == "<=":
            return bool(left <= right)
        if op == ">":
            return bool(left > right)
        if op == ">=":
            return bool(left >= right)
        return bool(left in right)
    except TypeError:
        return False


def _describe(node: Node) -> str:
    if node.parent is None:
        return f"machine '{node.name}'"
    label = "region" if node.kind is NodeKind.REGION else str(node.kind.value)
    return f"{label} '{node.path}'"


def _region_of(node: Node) -> Node | None:
    """The innermost region containing ``node`` (the node itself included), if any."""
    return next((n for n in [node, *node.ancestors()] if n.kind is NodeKind.REGION), None)


class _Builder:
    def __init__(self, source: Source, actions: Actions) -> None:
        self.source = source
        self.actions = actions
        self.index: dict[str, Node] = {}
        self.pending: list[tuple[Node, TransitionItem]] = []
        self.unbound: list[Token] = []

    def machine(self, program: Program, decl: MachineDecl) -> Definition:
        root = Node(name=decl.name, path="", kind=NodeKind.COMPOSITE)
        self.index[""] = root
        if not any(isinstance(item, StateItem) for item in decl.body):
            raise self.source.error_at(
                decl.name_token, f"machine '{decl.name}' has no states; add states and an initial"
            )
        self.fill(root, decl.body, decl.name_token)
        for scope, item in self.pending:
            scope.transitions.append(self.transition(scope, item))
        if self.unbound:
            names = ", ".join(f"'{t.value}' (line {t.line})" for t in self.unbound)
            raise self.source.error_at(
                self.unbound[0],
                f"unbound action names: {names}; pass them in actions= "
                "or write a dotted module.attr path",
            )
        events = {name: dict(fields) for name, fields in program.events.items()}
        return Definition(id=decl.name, root=root, index=self.index, events=events)

    # -- nodes -----------------------------------------------------------------------------
    def fill(self, node: Node, body: Body, head: Token) -> None:
        seen: dict[str, Token] = {}
        initial: Item | None = None
        for item in body:
            if isinstance(item, StateItem):
                self.child(node, item)
            elif isinstance(item, TransitionItem):
                if node.kind is NodeKind.LEAF:
                    raise self.source.error_at(
                        item.token,
                        f"transitions cannot be written inside leaf state '{node.path}'; "
                        "write them in the enclosing block",
                    )
                if node.kind is NodeKind.ORTHOGONAL:
                    raise self.source.error_at(
                        item.token,
                        f"transitions cannot be written directly inside orthogonal '{node.path}'; "
                        "write them inside a region or in the enclosing block",
                    )
                self.pending.append((node, item))
            else:
                if item.keyword in seen:
                    raise self.source.error_at(
                        item.token,
                        f"duplicate '{item.keyword}' in {_describe(node)} "
                        f"(first at line {seen[item.keyword].line})",
                    )
                seen[item.keyword] = item.token
                if item.keyword == "initial":
                    initial = item
                self.simple(node, item)
        self.check_initial(node, initial, head)

    def child(self, parent: Node, item: StateItem) -> None:
        if parent.child(item.name) is not None:
            raise self.source.error_at(
                item.name_token, f"duplicate state '{item.name}' in {_describe(parent)}"
            )
        has_children = any(isinstance(sub, StateItem) for sub in item.body)
        if parent.kind is NodeKind.ORTHOGONAL:
            if item.kind != "state" or not has_children:
                raise self.source.error_at(
                    item.token,
                    f"'{item.name}' in orthogonal '{parent.path}' must be a region: a composite "
                    f"state with its own states and initial (state {item.name} {{ initial ... }})",
                )
            kind = NodeKind.REGION
        elif item.kind == "orthogonal":
            if not has_children:
                raise self.source.error_at(
                    item.name_token, f"orthogonal '{item.name}' has no regions"
                )
            kind = NodeKind.ORTHOGONAL
        elif item.kind == "final" and has_children:
            raise self.source.error_at(
                item.name_token, f"final state '{item.name}' cannot contain states"
            )
        else:
            kind = NodeKind.COMPOSITE if has_children else NodeKind.LEAF
        path = f"{parent.path}.{item.name}" if parent.path else item.name
        node = Node(name=item.name, path=path, kind=kind, parent=parent, outcome=item.verdict)
        parent.children.append(node)
        self.index[path] = node
        self.fill(node, item.body, item.name_token)

    def simple(self, node: Node, item: Item) -> None:
        keyword = item.keyword
        if node.parent is None and keyword not in ("initial", "no history"):
            raise self.source.error_at(
                item.token, f"'{keyword}' is not allowed in a machine body; put it on a state"
            )
        if keyword == "initial":
            node.initial = item.value.value
        elif keyword in ("on enter", "on exit"):
            ref = self.action_ref(item.value)
            if keyword == "on enter":
                node.on_enter = ref
            else:
                node.on_exit = ref
        elif keyword == "timeout":
            node.timeout = item.value
        elif keyword == "outcome":
            if node.outcome is not None:
                raise self.source.error_at(
                    item.token,
                    f"final state '{node.path}' already has the verdict '{node.outcome}'",
                )
            node.outcome = item.value
        elif keyword == "carry":
            if node.kind is not NodeKind.REGION:
                raise self.source.error_at(
                    item.token,
                    f"'carry' belongs on a region (a direct child of an orthogonal state), "
                    f"not on {_describe(node)}",
                )
            node.carry = item.value
        else:
            node.history = False

    def check_initial(self, node: Node, initial: Item | None, head: Token) -> None:
        if node.kind in (NodeKind.LEAF, NodeKind.ORTHOGONAL):
            if initial is not None:
                why = (
                    "it has no child states"
                    if node.kind is NodeKind.LEAF
                    else ("an orthogonal state starts all of its regions")
                )
                raise self.source.error_at(
                    initial.token, f"'initial' is not allowed in {_describe(node)}: {why}"
                )
            return
        if initial is None:
            raise self.source.error_at(
                head, f"{_describe(node)} has child states but no 'initial'; add 'initial NAME'"
            )
        if node.child(node.initial or "") is None:
            ref: Ref = initial.value
            names = ", ".join(child.name for child in node.children)
            raise self.source.error_at(
                ref.token, f"initial '{ref.value}' names no child of {_describe(node)} ({names})"
            )

    def action_ref(self, decl: ActionDecl) -> ActionRef:
        target = self.actions.get(decl.name)
        if target is None:
            if not decl.dotted:
                self.unbound.append(decl.token)
            target = decl.name
        return ActionRef(label=decl.name, target=target, inputs=dict(decl.inputs))

    # -- transitions -----------------------------------------------------------------------
    def transition(self, scope: Node, item: TransitionItem) -> Transition:
        source = self.descend(scope, item.source)
        if source is None:
            raise self.source.error_at(
                item.source.token,
                f"unknown source state '{item.source.value}': it must be a child of "
                f'{_describe(scope)} (quote a deeper path: "A.B")',
            )
        region, inner = _region_of(scope), _region_of(source)
        if inner is not region and inner is not None:
            raise self.source.error_at(
                item.source.token,
                f"source '{source.path}' lies inside region '{inner.path}', which runs as its own "
                "execution; write the transition inside that region",
            )
        target = self.target(scope, item.target)
        if item.join is None:
            trigger = None
            if item.kinds:
                predicate = compile_guard(item.guard) if item.guard is not None else None
                trigger = Trigger(frozenset(item.kinds), predicate, item.guard_text)
            return Transition(source=source, target=target, trigger=trigger)
        if source.kind is not NodeKind.ORTHOGONAL:
            raise self.source.error_at(
                item.source.token,
                f"'join' needs an orthogonal source; '{source.path}' is a {source.kind.value}",
            )
        assert item.otherwise is not None
        otherwise = self.target(scope, item.otherwise)
        mode: Literal["all", "any"] = "all" if item.join == "all" else "any"
        chooser = Chooser(mode, target, otherwise)
        return Transition(source=source, target=None, chooser=chooser)

    def descend(self, start: Node, ref: Ref) -> Node | None:
        node: Node | None = start
        for part in ref.parts:
            node = node.child(part) if node is not None else None
        return node

    def target(self, scope: Node, ref: Ref) -> Node:
        block: Node | None = scope
        found: Node | None = None
        while block is not None and found is None:
            found = self.descend(block, ref)
            block = block.parent
        if found is None:
            raise self.source.error_at(
                ref.token,
                f"unknown target state '{ref.value}': no such state in {_describe(scope)} "
                "or any enclosing block",
            )
        region, inner = _region_of(scope), _region_of(found)
        if inner is not region:
            if inner is not None and (region is None or region in inner.ancestors()):
                raise self.source.error_at(
                    ref.token,
                    f"target '{found.path}' lies inside region '{inner.path}', which runs as its "
                    "own execution; target the orthogonal state instead",
                )
            raise self.source.error_at(
                ref.token,
                f"target '{found.path}' lies outside region '{region.path if region else ''}'; a "
                "region runs as its own execution and can only move inside itself (leave it "
                "from the orthogonal's enclosing block instead)",
            )
        return found
