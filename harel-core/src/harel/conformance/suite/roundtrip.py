"""The round-trip law over hostile input: what a store accepts reads back equal everywhere.

For each generated input — ids, paths, kinds, contexts, events, spawn contexts and trace steps
drawn from every Unicode plane, with NUL, lone surrogates, ``: { . $ % _ * ? [`` and quotes,
ids up to 64 KiB, ints at the 64-bit edges, NaN, nesting at the depth limit — the law checks:

* the commit's outcome (accepted, or the error class) is the reference DictStore's, and a
  refusal is a typed error (``StoreError``, ``TypeError`` or ``ValueError``) that restores
  ``exe.version``;
* an accepted commit reads back equal (strictly: types, float bits, NaN) through ``load``,
  ``load_for_event``, ``is_processed``, ``pending_outbox``, ``pending_spawns``, ``due_timers``,
  ``read_trace`` and ``list_executions``; a refused one wrote nothing — every read agrees with
  the reference's, including reads *with* the hostile ids;
* ``append_trace`` of a hostile step follows the same rule;
* after every input, refused or not, the store still commits and loads.

The rules themselves are :mod:`harel.store.common.limits`; the commit envelope applies them,
so a backend passes by using it and storing the codec's text faithfully.  Each example works
in its own id namespace, so one dataset serves the whole run.
"""

from __future__ import annotations

import copy
import math
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import hypothesis
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harel.conformance.harness import StoreHarness
from harel.conformance.profiles import kit_settings, kit_size
from harel.conformance.suite._base import (
    FAR_FUTURE,
    Flavour,
    Kit,
    KitBase,
    SyncAsAsync,
    event,
    new_exe,
    snapshot,
    step,
    stored,
)
from harel.conformance.suite.stateful import StoreDriver, open_driver
from harel.model import Event, Execution, Status
from harel.store.common.limits import (
    MAX_DOCUMENT_BYTES,
    MAX_ID_BYTES,
    MAX_INT,
    MAX_NESTING_DEPTH,
    MIN_INT,
)
from harel.store.contract import TimerOp
from harel.store.errors import InvalidIdentifier, InvalidPayload, PayloadTooLarge, StoreError

LAST_INSTANT = 1.7976931348623157e308
"""``now`` at which every armed timer is due, whatever finite ``fire_at`` it holds."""

SPECIAL = (
    "\x00",
    ":",
    "{",
    "}",
    ".",
    "$",
    "%",
    "_",
    "*",
    "?",
    "[",
    "]",
    "'",
    '"',
    "\\",
    "/",
    "#",
    " ",
    "\n",
    "\ud800",
    "\udfff",
    "\U0010ffff",
    "\ufeff",
    "\u202e",
    "🙂",
    "é",
    "漢",
)
"""Characters that break naive keys, patterns, paths, JSON or UTF-8 handling."""

BLOB_LITERAL_TEXTS = ("x'ab'", "X'00'", " x'CAFE' ", "x''")
"""Whole strings shaped like SQL BLOB literals (rqlite 8.31+ binds such a parameter as a BLOB
and returns it base64-encoded: ``x'ab'`` came back as ``qw==``)."""

ANY_CHAR = st.characters(exclude_categories=()) | st.sampled_from(SPECIAL)
"""Every plane, NUL and lone surrogates included."""

SAFE_SPECIAL = tuple(c for c in SPECIAL if c != "\x00" and not 0xD800 <= ord(c) <= 0xDFFF)
UNICODE_TEXT = st.characters(exclude_categories=["Cs"])
"""Every plane but lone surrogates."""
KEY_CHAR = UNICODE_TEXT.filter(lambda c: c != "\x00") | st.sampled_from(SAFE_SPECIAL)
"""Characters every identifier may hold."""

PAYLOAD_CHAR = UNICODE_TEXT | st.sampled_from((*SAFE_SPECIAL, "\x00"))
"""Characters every payload string may hold (NUL included)."""

PAD_SIZES = (MAX_ID_BYTES - 1, MAX_ID_BYTES, MAX_ID_BYTES + 1, 4096, 65536)


def nest(levels: int) -> Any:
    """``levels`` containers (lists and dicts alternating) around a scalar."""
    value: Any = "leaf"
    for level in range(levels):
        value = {"k": value} if level % 2 else [value]
    return value


@dataclass(frozen=True)
class Name:
    """A generated identifier, made concrete per example (``make(namespace)``).

    ``pad_to`` repeats ``raw`` until the whole id is that many UTF-8 bytes; ``bare`` skips the
    namespace (only for inputs that must be refused, such as the empty id).
    """

    raw: str
    pad_to: int | None = None
    bare: bool = False

    def make(self, ns: str) -> str:
        if self.bare:
            return self.raw
        if self.pad_to is None:
            return ns + self.raw
        unit = self.raw or "x"
        count, rest = divmod(self.pad_to - len(ns), len(unit.encode("utf-8", "surrogatepass")))
        return ns + unit * count + "x" * rest


def _poisoned_text(chars: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    bad = st.sampled_from(["\x00", "\ud800", "\udbff", "\udc00", "\udfff"])
    return st.builds(lambda a, b, c: a + b + c, st.text(chars, max_size=4), bad, st.text(chars))


GOOD_NAMES = st.one_of(
    st.builds(Name, st.text(KEY_CHAR, max_size=10)),
    st.builds(Name, st.text(KEY_CHAR, max_size=10)),
    st.builds(Name, st.sampled_from(["x", "é", "漢", "🙂"]), st.just(MAX_ID_BYTES)),
)
BAD_NAMES = st.one_of(
    st.just(Name("", bare=True)),
    st.builds(Name, _poisoned_text(KEY_CHAR)),
    st.builds(Name, st.text(ANY_CHAR, min_size=1, max_size=2), st.sampled_from(PAD_SIZES)),
)
GOOD_PATHS = st.text(KEY_CHAR, max_size=12) | st.sampled_from(["", "/", "A.B", "a/b/c", "$x"])
BAD_PATHS = _poisoned_text(KEY_CHAR) | st.builds(
    lambda unit, size: unit * (size // len(unit.encode("utf-8", "surrogatepass")) + 1),
    st.sampled_from(["x", "é", "🙂"]),
    st.sampled_from([MAX_ID_BYTES, 65536]),
)

INT_EDGES = (MIN_INT, MAX_INT, 2**53 + 1, -(2**53) - 1, 0, -1)
FLOAT_EDGES = (-0.0, 5e-324, LAST_INSTANT, 0.1 + 0.2, math.nan, math.inf, -math.inf)
FIRE_ATS = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(FLOAT_EDGES[:4])
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(MIN_INT, MAX_INT),
    st.sampled_from(INT_EDGES),
    st.floats(),
    st.sampled_from(FLOAT_EDGES),
    st.text(PAYLOAD_CHAR, max_size=12),
)
JSON = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(PAYLOAD_CHAR, max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
FIELD = st.dictionaries(st.text(PAYLOAD_CHAR, max_size=6), JSON, max_size=4) | st.just(
    {"deep": nest(MAX_NESTING_DEPTH - 1)}
)
"""A payload field (a context, event data, spawn context): valid JSON data."""

POISON_VALUES: tuple[Any, ...] = (
    (1, 2),
    {1, 2},
    frozenset({"a"}),
    b"bytes",
    {1: "int key"},
    {1: "a", "1": "b"},
    {None: 0},
    MAX_INT + 1,
    MIN_INT - 1,
    10**40,
    "lone \ud800 surrogate",
    {"key \udfff": 1},
    nest(MAX_NESTING_DEPTH),
    nest(250),
    object(),
)
"""Values that cannot read back equal (or at all): each must be refused before writing."""


@st.composite
def poisoned_field(draw: st.DrawFn) -> dict[str, Any]:
    """A valid field with one poison value buried somewhere in it."""
    base = dict(draw(st.dictionaries(st.text(KEY_CHAR, max_size=4), JSON, max_size=2)))
    poison = draw(st.sampled_from(POISON_VALUES))
    base[draw(st.sampled_from(["p", "q"]))] = draw(
        st.sampled_from([poison, [0, poison], {"inner": [1, {"x": poison}]}])
    )
    return base


@st.composite
def trace_steps(draw: st.DrawFn, poisoned: bool) -> dict[str, Any]:
    """A trace step shaped like the engine's, with hostile keys and values."""
    body: dict[str, Any] = {
        "event_kind": draw(st.text(PAYLOAD_CHAR, max_size=8)),
        "context_out": draw(FIELD),
        "timestamp": draw(st.floats() | st.sampled_from(FLOAT_EDGES)),
        "index": 99,
    }
    body.update(draw(st.dictionaries(st.text(PAYLOAD_CHAR, max_size=6), LEAVES, max_size=1)))
    if poisoned:
        if draw(st.booleans()):
            body["event_data"] = draw(poisoned_field())
        else:
            body[draw(_poisoned_text(PAYLOAD_CHAR))] = 1
    return body


SLOTS = (
    "id",
    "definition_id",
    "parent_id",
    "event_id",
    "target",
    "processed",
    "timer_path",
    "child_id",
    "root_path",
    "kind",
    "summary",
    "context",
    "event_data",
    "spawn_context",
    "trace",
    "step",
)
"""Where one input may carry its poison (or nowhere)."""


@dataclass
class CommitInput:
    """One generated commit (plus one ``append_trace`` step), before namespacing."""

    poison: str | None
    id: Name
    definition_id: Name
    parent_id: Name | None
    status: Status
    outcome: str | None
    active_path: str | None
    context: dict[str, Any]
    emits: list[tuple[Name | None, Name, str, dict[str, Any]]]
    processed: Name | None
    timers: list[tuple[bool, str, float]]
    spawns: list[tuple[Name, str, dict[str, Any]]]
    trace: dict[str, Any] | None
    step: dict[str, Any]


@st.composite
def commit_inputs(draw: st.DrawFn, poison: str | None) -> CommitInput:
    """A commit with hostile-but-valid parts and, unless ``poison`` is None, that slot poisoned."""

    def name(slot: str) -> Name:
        return draw(BAD_NAMES if poison == slot else GOOD_NAMES)

    def path(slot: str) -> str:
        return draw(BAD_PATHS if poison == slot else GOOD_PATHS)

    def payload(slot: str) -> dict[str, Any]:
        return draw(poisoned_field() if poison == slot else FIELD)

    n_emits = draw(
        st.integers(1 if poison in ("event_id", "target", "kind", "event_data") else 0, 2)
    )
    emits = []
    for k in range(n_emits):
        target: Name | None = name("target") if k == 0 else draw(st.none() | GOOD_NAMES)
        kind = draw(_poisoned_text(PAYLOAD_CHAR)) if poison == "kind" and k == 0 else "Go"
        event_id = name("event_id") if k == 0 else draw(GOOD_NAMES)
        emits.append((target, event_id, kind, payload("event_data") if k == 0 else draw(FIELD)))
    n_spawns = draw(
        st.integers(1 if poison in ("child_id", "root_path", "spawn_context") else 0, 1)
    )
    spawns = [
        (
            name("child_id") if k == 0 else draw(GOOD_NAMES),
            path("root_path") if k == 0 else draw(GOOD_PATHS),
            payload("spawn_context") if k == 0 else draw(FIELD),
        )
        for k in range(n_spawns)
    ]
    n_timers = draw(st.integers(1 if poison == "timer_path" else 0, 2))
    timers = [
        (
            draw(st.booleans()) or k == 0,
            path("timer_path") if k == 0 else draw(GOOD_PATHS),
            draw(
                st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(FLOAT_EDGES[:4])
            ),
        )
        for k in range(n_timers)
    ]
    bad_summary = poison == "summary"
    return CommitInput(
        poison=poison,
        id=name("id"),
        definition_id=name("definition_id"),
        parent_id=name("parent_id") if poison == "parent_id" else draw(st.none() | GOOD_NAMES),
        status=draw(st.sampled_from(list(Status))),
        outcome=draw(_poisoned_text(KEY_CHAR) if bad_summary else st.none() | st.text(KEY_CHAR)),
        active_path=draw(GOOD_PATHS | st.none()),
        context=payload("context"),
        emits=emits,
        processed=name("processed") if poison == "processed" else draw(st.none() | GOOD_NAMES),
        timers=timers,
        spawns=spawns,
        trace=draw(trace_steps(True) if poison == "trace" else st.none() | trace_steps(False)),
        step=draw(trace_steps(poison == "step")),
    )


# -- explicit examples: every poison, whatever the profile -----------------------------------

BAD_ID_NAMES = (
    Name("", bare=True),
    Name("nul\x00inside"),
    Name("lone\ud800"),
    Name("x", MAX_ID_BYTES + 1),
    Name("🙂", 65536),
)
BAD_PATH_TEXTS = ("nul\x00", "\udfff", "x" * (MAX_ID_BYTES + 1))
ID_SLOTS = ("id", "definition_id", "parent_id", "event_id", "target", "processed", "child_id")
PAYLOAD_SLOTS = ("context", "event_data", "spawn_context", "trace", "step")


def _base() -> CommitInput:
    return CommitInput(
        poison=None,
        id=Name("id"),
        definition_id=Name("def"),
        parent_id=None,
        status=Status.RUNNING,
        outcome=None,
        active_path="A.B",
        context={"k": 1},
        emits=[(Name("target"), Name("ev"), "Go", {"d": 1})],
        processed=Name("in"),
        timers=[(True, "/t", 1.0)],
        spawns=[(Name("child"), "/r", {"c": 1})],
        trace={"event_kind": "Go"},
        step={"event_kind": "Manual"},
    )


def _poisoned(slot: str, bad: Any) -> CommitInput:
    spec = _base()
    spec.poison = slot
    if slot in ("id", "definition_id", "parent_id", "processed"):
        setattr(spec, slot, bad)
    elif slot == "event_id":
        spec.emits = [(Name("target"), bad, "Go", {})]
    elif slot == "target":
        spec.emits = [(bad, Name("ev"), "Go", {})]
    elif slot == "child_id":
        spec.spawns = [(bad, "/r", {})]
    elif slot == "root_path":
        spec.spawns = [(Name("child"), bad, {})]
    elif slot == "timer_path":
        spec.timers = [(True, bad, 1.0)]
    elif slot == "kind":
        spec.emits = [(None, Name("ev"), bad, {})]
    elif slot == "summary":
        spec.outcome = bad
    elif slot == "context":
        spec.context = {"p": bad}
    elif slot == "event_data":
        spec.emits = [(None, Name("ev"), "Go", {"p": [bad]})]
    elif slot == "spawn_context":
        spec.spawns = [(Name("child"), "/r", {"p": {"q": bad}})]
    elif slot == "trace":
        spec.trace = {"event_kind": "Go", "context_out": {"p": bad}}
    else:
        spec.step = {"event_kind": "Manual", "p": bad}
    return spec


def explicit_inputs(slot: str | None) -> list[CommitInput]:
    """Hand-picked inputs for one poison slot, so every poison is tried in every profile."""
    if slot is None:
        at_limit = _base()
        at_limit.id = Name("🙂", MAX_ID_BYTES)
        at_limit.context = {"deep": nest(MAX_NESTING_DEPTH - 1), "n": [MIN_INT, MAX_INT]}
        at_limit.timers = [(True, "", -0.0), (True, "x" * MAX_ID_BYTES, LAST_INSTANT)]
        return [_base(), at_limit]
    if slot in ID_SLOTS:
        start = ID_SLOTS.index(slot)
        count = len(BAD_ID_NAMES) if slot == "id" else 2  # every read takes the execution id
        return [
            _poisoned(slot, BAD_ID_NAMES[(start + k) % len(BAD_ID_NAMES)]) for k in range(count)
        ]
    if slot in ("timer_path", "root_path"):
        return [_poisoned(slot, bad) for bad in BAD_PATH_TEXTS]
    if slot in ("kind", "summary"):
        return [_poisoned(slot, "bad\ud800" if slot == "kind" else "out\x00come")]
    start = PAYLOAD_SLOTS.index(slot)
    return [_poisoned(slot, bad) for bad in POISON_VALUES[start :: len(PAYLOAD_SLOTS)]]


# -- strict comparison ---------------------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    """Equal *and* of the same JSON type, floats bit for bit (NaN equals NaN)."""
    if isinstance(a, float) or isinstance(b, float):
        if type(a) is not float or type(b) is not float:
            return False
        if math.isnan(a) and math.isnan(b):
            return True
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(same(value, b[key]) for key, value in a.items())
        )
    if isinstance(a, (list, tuple)):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(same(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, (Execution, Event)):
        return type(a) is type(b) and same(a.model_dump(), b.model_dump())
    if isinstance(a, (bool, int)) or isinstance(b, (bool, int)):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _typed_failure(exc: BaseException) -> bool:
    return isinstance(exc, (StoreError, TypeError, ValueError))


Outcome = tuple[str, Any]


def outcome_of(call: Callable[[], Any], what: str) -> Outcome:
    """``("ok", value)`` or ``("error", class name)``; any untyped exception fails the test."""
    try:
        return ("ok", call())
    except Exception as exc:
        if not _typed_failure(exc):
            pytest.fail(
                f"{what} raised {type(exc).__module__}.{type(exc).__name__}: {exc!s:.300}; "
                "stores may raise only harel.store.errors types (or TypeError/ValueError for "
                "bad arguments)"
            )
        return ("error", type(exc).__name__)


def agree(got: Outcome, expected: Outcome, what: str) -> None:
    """Same outcome as the reference (values compared with :func:`same`)."""
    assert got[0] == expected[0] and (
        got[1] == expected[1] if got[0] == "error" else same(got[1], expected[1])
    ), f"{what}: store gave {_short(got)}, the reference DictStore {_short(expected)}"


def _short(outcome: Outcome) -> str:
    return f"{outcome[0]} {outcome[1]!r:.300}"


# -- the law -------------------------------------------------------------------------------


@dataclass
class Example:
    """One input made concrete in its namespace, with its commit arguments."""

    ns: str
    exe: Execution
    args: dict[str, Any]
    step: dict[str, Any]
    event_id: str
    expected_timers: list[tuple[str, str, float]] = field(default_factory=list)

    @classmethod
    def of(cls, spec: CommitInput) -> Example:
        ns = f"rt{uuid.uuid4().hex[:12]}-"
        exe = Execution.model_construct(
            id=spec.id.make(ns),
            definition_id=spec.definition_id.make(ns),
            parent_id=None if spec.parent_id is None else spec.parent_id.make(ns),
            status=spec.status,
            outcome=spec.outcome,
            active_path=spec.active_path,
            context=spec.context,
            version=0,
        )
        emits = [
            (
                None if target is None else target.make(ns),
                Event.model_construct(id=event_id.make(ns), kind=kind, data=data),
            )
            for target, event_id, kind, data in spec.emits
        ]
        args: dict[str, Any] = {
            "emits": emits,
            "processed_event_id": None if spec.processed is None else spec.processed.make(ns),
            "timers": tuple(
                TimerOp.schedule(path, at) if arm else TimerOp.cancel(path)
                for arm, path, at in spec.timers
            ),
            "spawns": [(child.make(ns), root, ctx) for child, root, ctx in spec.spawns],
            "trace": spec.trace,
        }
        probe = args["processed_event_id"] or f"{ns}unseen"
        return cls(ns, exe, args, spec.step, probe)

    def copy_args(self) -> dict[str, Any]:
        """Deep copies, so the store under test and the reference never share an object."""
        args = dict(self.args)
        args["emits"] = [(t, e.model_copy(deep=True)) for t, e in self.args["emits"]]
        args["spawns"] = [(c, r, _copy(ctx)) for c, r, ctx in self.args["spawns"]]
        args["trace"] = _copy(self.args["trace"])
        return args

    def mine(self, value: str | None) -> bool:
        return value is not None and value.startswith(self.ns)


def _copy(value: Any) -> Any:
    return copy.deepcopy(value)


@dataclass
class Leftovers:
    """The example's relay entries and timers, to drain after it."""

    outbox: list[int] = field(default_factory=list)
    spawns: list[int] = field(default_factory=list)
    timers: list[tuple[str, str, float]] = field(default_factory=list)


def observe(
    call: Callable[..., Any], ex: Example, leftovers: Leftovers | None = None
) -> dict[str, Outcome]:
    """Every read of the example's ids and of its namespace in the relays (whose entries go
    to ``leftovers``)."""
    exe_id, defn = ex.exe.id, ex.exe.definition_id
    seen: dict[str, Outcome] = {}

    def read(label: str, method: str, *args: Any, **kwargs: Any) -> None:
        seen[label] = outcome_of(lambda: call(method, *args, **kwargs), f"{method}{args!r:.120}")

    read("load", "load", exe_id)
    read("load_for_event", "load_for_event", exe_id, ex.event_id)
    read("is_processed", "is_processed", exe_id, ex.event_id)
    read("read_trace", "read_trace", exe_id)
    read("listing", "list_executions", definition_id=defn, limit=5)
    if seen["listing"][0] == "ok":
        page = seen["listing"][1]
        seen["listing"] = (
            "ok",
            [item.model_dump(exclude={"updated_at"}) for item in page.items],
        )
    outbox = [entry for entry in call("pending_outbox") if ex.mine(entry.event.id)]
    seen["outbox"] = ("ok", [(entry.target_id, entry.event) for entry in outbox])
    spawns = [spawn for spawn in call("pending_spawns") if ex.mine(spawn.parent_id)]
    seen["spawns"] = ("ok", [(s.parent_id, s.child_id, s.root_path, s.context) for s in spawns])
    timers = [timer for timer in call("due_timers", LAST_INSTANT) if ex.mine(timer[0])]
    seen["timers"] = ("ok", timers)
    if leftovers is not None:
        leftovers.outbox = [entry.seq for entry in outbox]
        leftovers.spawns = [spawn.seq for spawn in spawns]
        leftovers.timers = timers
    return seen


def expected_reads(ex: Example) -> dict[str, Any]:
    """What an accepted commit of ``ex`` must read back as (version 1)."""
    exe = ex.exe.model_copy(update={"version": 1})
    schedules: dict[str, float] = {}
    for op in ex.args["timers"]:
        schedules.pop(op.path, None)
        if op.action == "schedule":
            schedules[op.path] = op.fire_at + 0.0  # -0.0 is stored as 0.0
    timers = sorted(((exe.id, path, at) for path, at in schedules.items()), key=_timer_order)
    trace = ex.args["trace"]
    steps = (
        [] if trace is None else [{**{k: v for k, v in trace.items() if k != "index"}, "index": 0}]
    )
    return {
        "load": exe,
        "load_for_event": (exe, ex.args["processed_event_id"] is not None),
        "is_processed": ex.args["processed_event_id"] is not None,
        "read_trace": steps,
        "outbox": [(target, ev) for target, ev in ex.args["emits"]],
        "spawns": [(exe.id, child, root, ctx) for child, root, ctx in ex.args["spawns"]],
        "timers": timers,
    }


def _timer_order(timer: tuple[str, str, float]) -> tuple[float, str, str]:
    return (timer[2], timer[0], timer[1])


def check_example(sut: StoreDriver, spec: CommitInput) -> None:
    """The law for one input (see the module docstring)."""
    from harel.store.memory import DictStore

    ex = Example.of(spec)
    reference = DictStore()
    ref_call = StoreDriver(SyncAsAsync(reference), None)
    ref_exe, sut_exe = ex.exe.model_copy(deep=True), ex.exe.model_copy(deep=True)
    expected = outcome_of(lambda: reference.commit(ref_exe, **ex.copy_args()), "reference commit")
    got = outcome_of(lambda: sut("commit", sut_exe, **ex.copy_args()), "commit")
    hypothesis.event(f"poison={spec.poison} -> {got[0]} {got[1] if got[0] == 'error' else ''}")
    leftovers: Leftovers | None = None
    try:
        agree(got, expected, f"commit (poison: {spec.poison})")
        assert sut_exe.version == (1 if got[0] == "ok" else 0), (
            f"exe.version is {sut_exe.version} after a commit that {got[0]!r}ed"
        )
        leftovers = Leftovers()
        seen = observe(sut, ex, leftovers)
        for label, outcome in observe(ref_call, ex).items():
            agree(seen[label], outcome, label)
        if got[0] == "ok":
            for label, value in expected_reads(ex).items():
                assert seen[label][0] == "ok" and same(seen[label][1], value), (
                    f"{label} does not read back what was committed: {seen[label][1]!r:.300}"
                )
        agree(
            outcome_of(lambda: sut("append_trace", ex.exe.id, _copy(ex.step)), "append_trace"),
            outcome_of(lambda: reference.append_trace(ex.exe.id, _copy(ex.step)), "reference"),
            f"append_trace (poison: {spec.poison})",
        )
        agree(
            outcome_of(lambda: sut("read_trace", ex.exe.id), "read_trace"),
            outcome_of(lambda: reference.read_trace(ex.exe.id), "reference read_trace"),
            "read_trace after append_trace",
        )
    finally:
        _drain(sut, leftovers or observe_leftovers(sut, ex))
    if got[0] == "error":  # after a refused input, the store still commits and loads
        probe = new_exe(f"{ex.ns}probe", f"{ex.ns}probe")
        sut("commit", probe, [])
        loaded = sut("load", probe.id)
        assert loaded is not None and loaded.version == 1, "the store stopped working"


def observe_leftovers(sut: StoreDriver, ex: Example) -> Leftovers:
    """The example's relay entries and timers (when the law stopped before observing)."""
    leftovers = Leftovers()
    observe(sut, ex, leftovers)
    return leftovers


def _drain(sut: StoreDriver, leftovers: Leftovers) -> None:
    """Ack the example's relay entries and delete its timers, so later examples read less."""
    for seq in leftovers.outbox:
        sut("ack_outbox", seq)
    for seq in leftovers.spawns:
        sut("ack_spawn", seq)
    for execution_id, path, fire_at in leftovers.timers:
        sut("delete_timer", execution_id, path, fire_at)


class RoundTripTests(KitBase):
    """Hostile input: accepted means read back equal, refused means typed and nothing written."""

    def test_hostile_input_round_trips_or_is_refused(
        self, harel_harness: StoreHarness, flavour: Flavour
    ) -> None:
        """The law, over hand-picked inputs (every poison in every slot it can hide in) and
        ``roundtrip_examples`` generated ones (split over the poison slots)."""
        groups: tuple[str | None, ...] = (None, *SLOTS)
        share = max(2, kit_size("roundtrip_examples") // (len(groups) + 2))
        with open_driver(harel_harness, flavour) as driver:
            for poison in groups:

                @settings(kit_settings(), max_examples=share * (3 if poison is None else 1))
                @given(commit_inputs(poison))
                def law(spec: CommitInput) -> None:
                    check_example(driver, spec)

                for spec in explicit_inputs(poison):
                    law = example(spec)(law)
                law()

    async def test_blob_literal_shaped_strings_round_trip(self, kit: Kit) -> None:
        """Strings shaped like SQL BLOB literals (which rqlite 8.31+ binds as BLOBs when sent
        as parameters) are ids, paths and values like any other: they read back as text."""
        store = kit.store
        for n, text in enumerate(BLOB_LITERAL_TEXTS):
            exe = new_exe(text, definition_id=text, context={"v": text})
            await store.commit(
                exe,
                [(text, Event(id=text, kind="Go"))],
                processed_event_id=text,
                timers=[TimerOp.schedule(text, float(n))],
                spawns=[(text, text, {"v": text})],
                trace=step("Go", tag=text),
            )
            loaded = await store.load(text)
            assert loaded is not None and (loaded.id, loaded.definition_id) == (text, text)
            assert loaded.context == {"v": text} and await store.is_processed(text, text)
            assert [t["tag"] for t in await store.read_trace(text)] == [text]
            page = await store.list_executions(definition_id=text)
            assert [summary.id for summary in page.items] == [text]
        expected = sorted(BLOB_LITERAL_TEXTS)
        due = await store.due_timers(FAR_FUTURE)
        assert sorted((execution_id, path) for execution_id, path, _ in due) == [
            (t, t) for t in expected
        ]
        outbox = await store.pending_outbox()
        assert sorted((e.target_id or "", e.event.id) for e in outbox) == [(t, t) for t in expected]
        spawns = await store.pending_spawns()
        assert sorted((s.parent_id, s.child_id, s.root_path, s.context["v"]) for s in spawns) == [
            (t, t, t, t) for t in expected
        ]

    @pytest.mark.parametrize("part", ["context", "event", "spawn", "trace", "append_trace"])
    async def test_documents_over_16_mib_are_refused(self, kit: Kit, part: str) -> None:
        """Over the shared ceiling every backend refuses, naming its limit; nothing is written."""
        store = kit.store
        exe = await stored(store, new_exe("kit-big"))
        before = await snapshot(store, ["kit-big"], ["big-in"])
        blob = "x" * MAX_DOCUMENT_BYTES
        args: dict[str, Any] = {"emits": [], "processed_event_id": "big-in"}
        if part == "context":
            exe.context["blob"] = blob
        elif part == "event":
            args["emits"] = [(None, event("big-e", blob=blob))]
        elif part == "spawn":
            args["spawns"] = [("big-child", "/r", {"blob": blob})]
        elif part == "trace":
            args["trace"] = step("Big", blob=blob)
        with pytest.raises(PayloadTooLarge) as info:
            if part == "append_trace":
                await store.append_trace("kit-big", step("Big", blob=blob))
            else:
                await store.commit(exe, **args)
        assert any(ch.isdigit() for ch in str(info.value)), "the message must name the limit"
        assert exe.version == 1
        assert await snapshot(store, ["kit-big"], ["big-in"]) == before
        exe.context.pop("blob", None)
        await store.commit(exe, [(None, event("after"))])
        assert [e.event.id for e in await store.pending_outbox()] == ["after"]

    async def test_nesting_limit_is_exact_and_poison_never_blocks_the_relays(
        self, kit: Kit
    ) -> None:
        """64 levels read back everywhere; 65 and 250 are refused, and the outbox still serves."""
        store = kit.store
        deep = {"v": nest(MAX_NESTING_DEPTH - 1)}
        await store.commit(
            new_exe("kit-deep", context=deep),
            [(None, Event(id="deep-e", kind="Go", data=deep))],
            spawns=[("deep-child", "/r", deep)],
            trace=step("Deep", context_out=deep, event_data=deep),
        )
        loaded = await store.load("kit-deep")
        assert loaded is not None and loaded.context == deep
        (entry,) = await store.pending_outbox()
        assert entry.event.data == deep
        (spawn,) = await store.pending_spawns()
        assert spawn.context == deep
        (trace,) = await store.read_trace("kit-deep")
        assert trace["context_out"] == deep and trace["event_data"] == deep
        for levels in (MAX_NESTING_DEPTH, 250):
            poison = {"v": nest(levels)}
            with pytest.raises(InvalidPayload):
                await store.commit(new_exe("kit-poison", context=poison), [])
            with pytest.raises(InvalidPayload):
                await store.commit(
                    new_exe("kit-poison"), [(None, Event(id="p-e", kind="Go", data=poison))]
                )
            with pytest.raises(InvalidPayload):
                await store.append_trace("kit-deep", step("Deep", context_out=poison))
        assert await store.load("kit-poison") is None
        assert [e.event.id for e in await store.pending_outbox()] == ["deep-e"]
        assert len(await store.read_trace("kit-deep")) == 1

    @pytest.mark.parametrize("unit", ["x", "é", "漢", "🙂"])
    async def test_ids_at_the_byte_limit_round_trip(self, kit: Kit, unit: str) -> None:
        """An id of exactly MAX_ID_BYTES works in every role; one byte more is refused."""
        size = len(unit.encode())
        at_limit = unit * (MAX_ID_BYTES // size) + "x" * (MAX_ID_BYTES % size)
        over = at_limit + "x"
        store = kit.store
        await store.commit(
            new_exe(at_limit, at_limit, parent_id=at_limit),
            [(at_limit, event(at_limit))],
            processed_event_id=at_limit,
            timers=(TimerOp.schedule(at_limit, 5.0),),
            spawns=[(at_limit, at_limit, {})],
            trace=step(at_limit),
        )
        loaded, seen = await store.load_for_event(at_limit, at_limit)
        assert loaded is not None and loaded.id == at_limit and seen is True
        assert await store.due_timers(FAR_FUTURE) == [(at_limit, at_limit, 5.0)]
        (entry,) = await store.pending_outbox()
        assert (entry.target_id, entry.event.id) == (at_limit, at_limit)
        page = await store.list_executions(definition_id=at_limit)
        assert [item.id for item in page.items] == [at_limit]
        await store.delete_timer(at_limit, at_limit, 5.0)
        assert await store.due_timers(FAR_FUTURE) == []
        for bad in (over, "x" * 65536, unit * 65536):
            with pytest.raises(InvalidIdentifier):
                await store.commit(new_exe(bad), [])
            with pytest.raises(InvalidIdentifier):
                await store.load(bad)
        await store.commit(new_exe("kit-after"), [])
        assert (await store.load("kit-after")) is not None


__all__ = ["CommitInput", "RoundTripTests", "check_example", "commit_inputs", "same"]
