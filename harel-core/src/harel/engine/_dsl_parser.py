"""Recursive-descent parser of the DSL subset (engine.md §4.2) into a small syntax tree.

The parser checks what is local to one item (a ``final`` without a verdict, a negative
``timeout``, an unknown field type, a reserved kind declared as ``event``); structural rules
that need the whole tree live in :mod:`harel.engine._dsl_builder`.  Keywords are reserved only
where an item starts, so a state may well be called ``timeout``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harel.engine._dsl_lexer import Source, Token, tokenize
from harel.engine.definition import FieldSpec

RESERVED_KINDS = frozenset(
    {"Start", "Finished", "Timeout", "Cancel", "Reset", "SetState", "Returned"}
)
FIELD_TYPES = frozenset({"string", "int", "float", "bool", "any"})
ITEM_KEYWORDS = (
    "initial", "state", "orthogonal", "final", "on", "timeout", "outcome", "carry", "no", "from",
)  # fmt: skip
_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})


@dataclass
class Ref:
    """A state reference as written: a NAME, or a quoted dotted path (``quoted``)."""

    value: str
    quoted: bool
    token: Token

    @property
    def parts(self) -> list[str]:
        """The path segments (a NAME is one segment)."""
        return self.value.split(".") if self.quoted else [self.value]


@dataclass
class ActionDecl:
    """``name`` or ``pkg.mod.fn`` with optional ``(key: literal, ...)`` inputs."""

    name: str
    dotted: bool
    inputs: dict[str, Any]
    token: Token


@dataclass
class Compare:
    """``field OP literal``; ``field`` is a path into ``event.data``."""

    field: tuple[str, ...]
    op: str
    value: Any


@dataclass
class BoolOp:
    """``and`` / ``or`` over two or more parts, or ``not`` over one."""

    op: str
    parts: list[Guard]


Guard = Compare | BoolOp


@dataclass
class Item:
    """One body item; ``keyword`` names it (``initial``, ``on enter``, ...)."""

    keyword: str
    token: Token
    value: Any = None


@dataclass
class TransitionItem:
    """``from S to T [on K | K2 [where pred]]`` or ``from S join all|any to T else to U``."""

    token: Token
    source: Ref
    target: Ref
    kinds: list[str] = field(default_factory=list)
    guard: Guard | None = None
    guard_text: str | None = None
    join: str | None = None
    otherwise: Ref | None = None


@dataclass
class StateItem:
    """``state``/``orthogonal``/``final`` with its body; ``verdict`` only for ``final``."""

    kind: str
    token: Token
    name_token: Token
    verdict: str | None
    body: list[Item | TransitionItem | StateItem]

    @property
    def name(self) -> str:
        """The state's name."""
        return str(self.name_token.value)


@dataclass
class MachineDecl:
    """``machine NAME { items }``."""

    token: Token
    name_token: Token
    body: list[Item | TransitionItem | StateItem]

    @property
    def name(self) -> str:
        """The machine's name (the definition id)."""
        return str(self.name_token.value)


@dataclass
class Program:
    """Everything in one text: event declarations and machines, in order."""

    events: dict[str, dict[str, FieldSpec]]
    machines: list[MachineDecl]


def parse(source: Source) -> Program:
    """Parse a whole DSL text; raises :class:`DslError` at the first problem."""
    return _Parser(source).program()


class _Parser:
    def __init__(self, source: Source) -> None:
        self.source = source
        self.tokens = tokenize(source)
        self.pos = 0

    # -- token helpers ---------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.peek()
        self.pos = min(self.pos + 1, len(self.tokens) - 1)
        return token

    def at(self, value: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token.kind in ("name", "punct") and token.value == value

    def fail(self, expected: str, token: Token | None = None) -> Exception:
        token = token or self.peek()
        return self.source.error_at(token, f"expected {expected}, found {token.describe()}")

    def expect(self, value: str, expected: str | None = None) -> Token:
        if not self.at(value):
            raise self.fail(expected or f"'{value}'")
        return self.advance()

    def name(self, expected: str) -> Token:
        if self.peek().kind != "name":
            raise self.fail(expected)
        return self.advance()

    # -- program ---------------------------------------------------------------------------
    def program(self) -> Program:
        events: dict[str, dict[str, FieldSpec]] = {}
        machines: list[MachineDecl] = []
        seen: dict[str, Token] = {}
        while self.peek().kind != "eof":
            if self.at("event"):
                self.advance()
                name = self.name("an event name")
                if name.value in RESERVED_KINDS:
                    raise self.source.error_at(
                        name, f"'{name.value}' is a reserved engine kind; pick another event name"
                    )
                if name.value in events:
                    raise self.source.error_at(name, f"event '{name.value}' is declared twice")
                events[name.value] = self.event_fields()
            elif self.at("machine"):
                token = self.advance()
                name = self.name("a machine name")
                if name.value in seen:
                    first = seen[name.value]
                    raise self.source.error_at(
                        name,
                        f"machine '{name.value}' is declared twice (first at line {first.line})",
                    )
                seen[name.value] = name
                machines.append(MachineDecl(token, name, self.block()))
            else:
                raise self.fail("'event' or 'machine'")
        return Program(events, machines)

    def event_fields(self) -> dict[str, FieldSpec]:
        self.expect("{", "'{' after the event name")
        fields: dict[str, FieldSpec] = {}
        while not self.at("}"):
            name = self.name("a field name or '}'")
            self.expect(":", f"':' after field '{name.value}'")
            type_token = self.name("a field type (string, int, float, bool, any)")
            if type_token.value not in FIELD_TYPES:
                raise self.source.error_at(
                    type_token,
                    f"unknown field type '{type_token.value}'; use string, int, float, bool or any",
                )
            optional = self.at("?")
            if optional:
                self.advance()
            fields[name.value] = FieldSpec(type_token.value, optional)
            if self.at(","):
                self.advance()
        self.advance()
        return fields

    # -- items -----------------------------------------------------------------------------
    def block(self) -> list[Item | TransitionItem | StateItem]:
        self.expect("{")
        items: list[Item | TransitionItem | StateItem] = []
        while not self.at("}"):
            items.append(self.item())
        self.advance()
        return items

    def item(self) -> Item | TransitionItem | StateItem:
        token = self.peek()
        keyword = token.value if token.kind == "name" else None
        if keyword not in ITEM_KEYWORDS:
            raise self.fail(f"an item ({', '.join(ITEM_KEYWORDS)}) or '}}'")
        self.advance()
        if keyword in ("state", "orthogonal"):
            name = self.name(f"a name after '{keyword}'")
            return StateItem(keyword, token, name, None, self.block())
        if keyword == "final":
            name = self.name("a name after 'final'")
            verdict = self.peek()
            if verdict.kind != "name" or verdict.value in ITEM_KEYWORDS:
                raise self.source.error_at(
                    verdict,
                    f"expected a verdict after 'final {name.value}' "
                    f"(e.g. 'final {name.value} success'), found {verdict.describe()}",
                )
            self.advance()
            body = self.block() if self.at("{") else []
            return StateItem("final", token, name, verdict.value, body)
        if keyword == "initial":
            return Item("initial", token, self.ref("a state name after 'initial'"))
        if keyword == "on":
            which = self.peek()
            if which.value not in ("enter", "exit") or which.kind != "name":
                raise self.fail("'enter' or 'exit' after 'on'")
            self.advance()
            return Item(f"on {which.value}", token, self.action())
        if keyword == "timeout":
            return Item("timeout", token, self.timeout())
        if keyword == "outcome":
            return Item("outcome", token, self.name("an outcome label").value)
        if keyword == "carry":
            names = [self.name("a context key after 'carry'").value]
            while self.at(","):
                self.advance()
                names.append(self.name("a context key after ','").value)
            return Item("carry", token, tuple(names))
        if keyword == "no":
            self.expect("history", "'history' after 'no'")
            return Item("no history", token)
        return self.transition(token)

    def ref(self, expected: str) -> Ref:
        token = self.peek()
        if token.kind == "dotted":
            raise self.source.error_at(token, f'a state path must be quoted: write "{token.value}"')
        if token.kind not in ("name", "string"):
            raise self.fail(expected)
        self.advance()
        return Ref(str(token.value), token.kind == "string", token)

    def action(self) -> ActionDecl:
        token = self.peek()
        if token.kind not in ("name", "dotted"):
            raise self.fail("an action name or dotted path")
        self.advance()
        inputs: dict[str, Any] = {}
        if self.at("("):
            self.advance()
            while not self.at(")"):
                key = self.name("an input name or ')'")
                self.expect(":", f"':' after input '{key.value}'")
                inputs[key.value] = self.literal()
                if not self.at(")"):
                    self.expect(",", "',' or ')'")
            self.advance()
        return ActionDecl(token.value, token.kind == "dotted", inputs, token)

    def timeout(self) -> float | tuple[str, str]:
        token = self.peek()
        if token.kind == "number":
            self.advance()
            if token.value < 0:
                raise self.source.error_at(
                    token, f"timeout must not be negative, got {token.value}"
                )
            return float(token.value)
        if self.at("context"):
            self.advance()
            return ("context", self.name("a context key after 'timeout context'").value)
        raise self.fail("a number of seconds or 'context KEY' after 'timeout'")

    def transition(self, token: Token) -> TransitionItem:
        source = self.ref("a source state after 'from'")
        if self.at("join"):
            self.advance()
            mode = self.peek()
            if mode.value not in ("all", "any") or mode.kind != "name":
                raise self.fail("'all' or 'any' after 'join'")
            self.advance()
            self.expect("to", f"'to' after 'join {mode.value}'")
            target = self.ref("a target state after 'to'")
            self.expect("else", "'else to STATE' (a join needs both targets)")
            self.expect("to", "'to' after 'else'")
            otherwise = self.ref("a target state after 'else to'")
            return TransitionItem(token, source, target, join=mode.value, otherwise=otherwise)
        self.expect("to", "'to' (or 'join') after the source state")
        item = TransitionItem(token, source, self.ref("a target state after 'to'"))
        if self.at("on") and not (self.at("enter", 1) or self.at("exit", 1)):
            self.advance()
            item.kinds.append(self.name("an event kind after 'on'").value)
            while self.at("|"):
                self.advance()
                item.kinds.append(self.name("an event kind after '|'").value)
            if self.at("where"):
                self.advance()
                start = self.peek().start
                item.guard = self.disjunction()
                item.guard_text = self.source.text[start : self.tokens[self.pos - 1].end]
        return item

    # -- guards ----------------------------------------------------------------------------
    def disjunction(self) -> Guard:
        parts = [self.conjunction()]
        while self.at("or"):
            self.advance()
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else BoolOp("or", parts)

    def conjunction(self) -> Guard:
        parts = [self.negation()]
        while self.at("and"):
            self.advance()
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else BoolOp("and", parts)

    def negation(self) -> Guard:
        if self.at("not"):
            self.advance()
            return BoolOp("not", [self.negation()])
        if self.at("("):
            self.advance()
            inner = self.disjunction()
            self.expect(")", "')' closing the condition")
            return inner
        token = self.peek()
        if token.kind not in ("name", "dotted"):
            raise self.fail("a field name, 'not' or '(' in the condition")
        self.advance()
        op = self.peek()
        if not (op.kind == "punct" and op.value in _COMPARISONS) and not self.at("in"):
            raise self.fail(f"a comparison (== != < <= > >= in) after '{token.value}'")
        self.advance()
        return Compare(tuple(str(token.value).split(".")), str(op.value), self.literal())

    def literal(self) -> Any:
        token = self.peek()
        if token.kind in ("string", "number"):
            self.advance()
            return token.value
        if self.at("true") or self.at("false"):
            self.advance()
            return token.value == "true"
        if self.at("["):
            self.advance()
            values: list[Any] = []
            while not self.at("]"):
                values.append(self.literal())
                if not self.at("]"):
                    self.expect(",", "',' or ']' in the list")
            self.advance()
            return values
        raise self.fail('a literal (a "string", a number, true, false or a [list])')
