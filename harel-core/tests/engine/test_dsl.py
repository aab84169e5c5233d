"""The DSL: tokenizer, parser and builder (engine.md §4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harel.engine.definition import ActionRef, Definition, FieldSpec, Node, NodeKind
from harel.engine.dsl import (
    DslError,
    definition_from_dsl,
    definition_from_dsl_file,
    definitions_from_dir,
    definitions_from_dsl,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ACCEPTANCE = (
    "event Go {} machine m { initial A  state A {}  final Done success {}  from A to Done on Go }"
)

PARCEL = """\
event Begin {}  event Next {}  event Ship {}
machine parcel {
  initial Idle
  state Idle {}
  state Packing {
    on enter pk_in
    on exit  pk_out
    initial Wrap
    state Wrap  { on enter wrap }
    state Label { on enter label }
    from Wrap to Label on Next
    from Label to Sent on Ship
  }
  final Sent success { on enter sent }
  from Idle to Packing on Begin
}
"""

INVOICE = """\
event Paid {}
machine invoice {
  initial Open
  state Open { timeout 60 }
  final Settled success {}
  final Expired expired {}
  from Open to Settled on Paid
  from Open to Expired on Timeout
}
"""

ONBOARDING = """\
event IdOk {}  event ScoreReady { score: int }
machine onboarding {
  initial Checks
  orthogonal Checks {
    state Identity { initial Pending  state Pending {}  final Verified success {}
                     from Pending to Verified on IdOk }
    state Credit   { carry score  initial Waiting  state Waiting {}
                     final Scored success { on enter keep_score }
                     from Waiting to Scored on ScoreReady }
  }
  final Accepted success {}
  final Rejected rejected {}
  from Checks join all to Accepted else to Rejected
}
"""


def _noop(stm: Any, event: Any, **inputs: Any) -> None:
    return None


PARCEL_ACTIONS = {name: _noop for name in ("pk_in", "pk_out", "wrap", "label", "sent")}


def keep_score(stm: Any, event: Any, **_: Any) -> None:
    stm.execution_ctx.update(score=event.data["score"])


def position(text: str, needle: str, occurrence: int = 0) -> tuple[int, int]:
    """1-based (line, column) of the ``occurrence``-th ``needle`` in ``text`` (-1: the last)."""
    offset = text.rindex(needle) if occurrence < 0 else -1
    for _ in range(occurrence + 1):
        offset = text.index(needle, offset + 1)
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def dsl_error(text: str, name: str | None = None, **kwargs: Any) -> DslError:
    with pytest.raises(DslError) as info:
        definition_from_dsl(text, name, **kwargs)
    return info.value


def assert_error_at(
    text: str, needle: str, fragment: str, occurrence: int = 0, **kwargs: Any
) -> DslError:
    error = dsl_error(text, **kwargs)
    assert (error.line, error.column) == position(text, needle, occurrence), str(error)
    assert fragment in error.message, str(error)
    return error


def kinds(defn: Definition) -> dict[str, NodeKind]:
    return {path: node.kind for path, node in defn.index.items()}


def only_transition(node: Node) -> Any:
    assert len(node.transitions) == 1
    return node.transitions[0]


# -- the acceptance snippet and the reference machines ----------------------------------------


def test_acceptance_one_liner() -> None:
    defn = definition_from_dsl(ACCEPTANCE, "m")
    assert defn.id == "m"
    assert defn.root.path == "" and defn.root.kind is NodeKind.COMPOSITE
    assert defn.root.initial == "A"
    assert kinds(defn) == {"": NodeKind.COMPOSITE, "A": NodeKind.LEAF, "Done": NodeKind.LEAF}
    assert defn.node("Done").outcome == "success"
    assert defn.node("A").outcome is None
    t = only_transition(defn.root)
    assert t.source is defn.node("A") and t.target is defn.node("Done")
    assert t.trigger.kinds == frozenset({"Go"}) and t.trigger.predicate is None
    assert t.chooser is None
    assert defn.events == {"Go": {}}
    assert [n.path for n in defn.root.children] == ["A", "Done"]
    assert defn.node("A").parent is defn.root


def test_name_is_optional_for_a_single_machine() -> None:
    assert definition_from_dsl(ACCEPTANCE).id == "m"


def test_parcel() -> None:
    defn = definition_from_dsl(PARCEL, "parcel", actions=PARCEL_ACTIONS)
    assert kinds(defn) == {
        "": NodeKind.COMPOSITE,
        "Idle": NodeKind.LEAF,
        "Packing": NodeKind.COMPOSITE,
        "Packing.Wrap": NodeKind.LEAF,
        "Packing.Label": NodeKind.LEAF,
        "Sent": NodeKind.LEAF,
    }
    packing = defn.node("Packing")
    assert packing.initial == "Wrap" and packing.history is True
    assert isinstance(packing.on_enter, ActionRef)
    assert packing.on_enter.label == "pk_in" and packing.on_enter.target is _noop
    assert packing.on_exit is not None and packing.on_exit.label == "pk_out"
    assert packing.on_enter.inputs == {}
    assert defn.node("Packing.Wrap").on_enter.label == "wrap"  # type: ignore[union-attr]
    assert defn.node("Sent").on_enter.label == "sent"  # type: ignore[union-attr]
    # scopes: Packing owns its inner transitions; Sent resolves at the machine level
    wrap_label, label_sent = packing.transitions
    assert wrap_label.source is defn.node("Packing.Wrap")
    assert wrap_label.target is defn.node("Packing.Label")
    assert label_sent.source is defn.node("Packing.Label")
    assert label_sent.target is defn.node("Sent")
    assert label_sent.trigger.kinds == frozenset({"Ship"})
    (begin,) = defn.root.transitions
    assert begin.source is defn.node("Idle") and begin.target is packing
    assert defn.node("Packing.Wrap").transitions == []
    assert set(defn.events) == {"Begin", "Next", "Ship"}
    assert defn.node("Packing.Label").outgoing() == [label_sent]


def test_invoice() -> None:
    defn = definition_from_dsl(INVOICE, "invoice")
    assert defn.node("Open").timeout == 60.0
    assert isinstance(defn.node("Open").timeout, float)
    assert defn.node("Settled").outcome == "success"
    assert defn.node("Expired").outcome == "expired"
    paid, timeout = defn.root.transitions
    assert paid.trigger.kinds == frozenset({"Paid"})
    assert timeout.trigger.kinds == frozenset({"Timeout"})
    assert timeout.target is defn.node("Expired")


def test_onboarding() -> None:
    defn = definition_from_dsl(ONBOARDING, "onboarding", actions={"keep_score": keep_score})
    assert kinds(defn) == {
        "": NodeKind.COMPOSITE,
        "Checks": NodeKind.ORTHOGONAL,
        "Checks.Identity": NodeKind.REGION,
        "Checks.Identity.Pending": NodeKind.LEAF,
        "Checks.Identity.Verified": NodeKind.LEAF,
        "Checks.Credit": NodeKind.REGION,
        "Checks.Credit.Waiting": NodeKind.LEAF,
        "Checks.Credit.Scored": NodeKind.LEAF,
        "Accepted": NodeKind.LEAF,
        "Rejected": NodeKind.LEAF,
    }
    checks = defn.node("Checks")
    assert checks.initial is None and checks.transitions == []
    credit = defn.node("Checks.Credit")
    assert credit.carry == ("score",) and credit.initial == "Waiting"
    assert defn.node("Checks.Identity").carry == ()
    assert defn.node("Checks.Credit.Scored").on_enter.target is keep_score  # type: ignore[union-attr]
    (score,) = credit.transitions
    assert score.source is defn.node("Checks.Credit.Waiting")
    assert score.target is defn.node("Checks.Credit.Scored")
    (join,) = defn.root.transitions
    assert join.source is checks and join.target is None and join.trigger is None
    assert join.chooser.mode == "all" and join.chooser.label == "join all"
    assert join.chooser.when_true is defn.node("Accepted")
    assert join.chooser.otherwise is defn.node("Rejected")
    assert defn.events["ScoreReady"] == {"score": FieldSpec("int", False)}
    assert defn.events["IdOk"] == {}


def test_join_any_and_plain_join() -> None:
    text = ONBOARDING.replace("join all", "join any")
    defn = definition_from_dsl(text, actions={"keep_score": keep_score})
    assert defn.root.transitions[0].chooser.mode == "any"
    plain = ONBOARDING.replace("join all to Accepted else to Rejected", "to Accepted")
    defn = definition_from_dsl(plain, actions={"keep_score": keep_score})
    (t,) = defn.root.transitions
    assert t.trigger is None and t.chooser is None and t.target is defn.node("Accepted")


# -- items ----------------------------------------------------------------------------------


def test_items_timeout_context_outcome_no_history_inputs() -> None:
    text = """
    machine m {
      initial P
      state P {
        no history
        timeout context backoff
        on enter pkg.mod.fn(code: 3, ratio: -1.5, tag: "a\\"b", ok: true, xs: [1, "two", [false]])
        on exit done()
        initial X
        state X { outcome failed  timeout 0 }
      }
    }
    """
    defn = definition_from_dsl(text, actions={"done": "other.module.done"})
    p = defn.node("P")
    assert p.history is False and p.timeout == ("context", "backoff")
    assert p.on_enter == p.on_enter and p.on_enter is not None
    assert p.on_enter.label == "pkg.mod.fn" and p.on_enter.target == "pkg.mod.fn"
    assert p.on_enter.inputs == {
        "code": 3,
        "ratio": -1.5,
        "tag": 'a"b',
        "ok": True,
        "xs": [1, "two", [False]],
    }
    assert p.on_exit is not None and p.on_exit.target == "other.module.done"
    assert p.on_exit.label == "done" and p.on_exit.inputs == {}
    x = defn.node("P.X")
    assert x.outcome == "failed" and x.timeout == 0.0 and x.history is True


def test_final_without_body_and_final_with_hooks() -> None:
    defn = definition_from_dsl(
        "machine m { initial A state A {} final B ok final C bad { on enter x } from A to B }",
        actions={"x": _noop},
    )
    assert defn.node("B").outcome == "ok" and defn.node("B").kind is NodeKind.LEAF
    assert defn.node("C").on_enter.target is _noop  # type: ignore[union-attr]
    assert defn.root.transitions[0].trigger is None  # automatic


def test_keywords_are_reserved_only_at_item_starts() -> None:
    text = "machine m { initial timeout state timeout {} state from {} from timeout to from on on }"
    defn = definition_from_dsl(text)
    (t,) = defn.root.transitions
    assert t.source is defn.node("timeout") and t.target is defn.node("from")
    assert t.trigger.kinds == frozenset({"on"})


def test_on_enter_after_an_automatic_transition_is_a_hook_not_a_trigger() -> None:
    text = (
        "machine m { initial P state P { initial A state A {} state B {} from A to B on exit x } }"
    )
    defn = definition_from_dsl(text, actions={"x": _noop})
    assert defn.node("P").on_exit is not None
    assert defn.node("P").transitions[0].trigger is None


def test_comments_and_free_form_whitespace() -> None:
    text = """
    # a hash comment
    event Go {}   // a slash comment
    machine m {   # trailing
      initial A   // initial
      state A {}  # leaf
      final Done success // verdict
      from A      # split
        to Done   // over
        on Go     # lines
    }
    // done # still a comment
    """
    defn = definition_from_dsl(text)
    assert defn.root.transitions[0].trigger.kinds == frozenset({"Go"})
    assert set(defn.index) == {"", "A", "Done"}


def test_event_declarations() -> None:
    text = """
    event Paid { amount: float  note: string?, count: int, flag: bool  extra: any? }
    machine m { initial A state A {} }
    """
    defn = definition_from_dsl(text)
    assert defn.events == {
        "Paid": {
            "amount": FieldSpec("float"),
            "note": FieldSpec("string", True),
            "count": FieldSpec("int"),
            "flag": FieldSpec("bool"),
            "extra": FieldSpec("any", True),
        }
    }


def test_undeclared_event_kinds_are_accepted() -> None:
    defn = definition_from_dsl("event Go {} machine m { initial A state A {} from A to A on Nope }")
    assert defn.root.transitions[0].trigger.kinds == frozenset({"Nope"})


# -- triggers and guards ----------------------------------------------------------------------


def guard(condition: str) -> Any:
    defn = definition_from_dsl(
        f"machine m {{ initial A state A {{}} state B {{}} from A to B on Go where {condition} }}"
    )
    trigger = defn.root.transitions[0].trigger
    assert trigger.predicate_text == condition
    return trigger.predicate


def test_several_kinds() -> None:
    defn = definition_from_dsl("machine m { initial A state A {} from A to A on Go | Retry|Again }")
    assert defn.root.transitions[0].trigger.kinds == frozenset({"Go", "Retry", "Again"})


@pytest.mark.parametrize(
    ("condition", "true_for", "false_for"),
    [
        ("amount == 10", {"amount": 10}, {"amount": 11}),
        ("amount != 10", {"amount": 11}, {"amount": 10}),
        ("amount < 10", {"amount": 9.5}, {"amount": 10}),
        ("amount <= 10", {"amount": 10}, {"amount": 10.5}),
        ("amount > 10", {"amount": 11}, {"amount": 10}),
        ("amount >= 10", {"amount": 10}, {"amount": 9}),
        ('tier in ["a", "b"]', {"tier": "b"}, {"tier": "c"}),
        ('name == "x y"', {"name": "x y"}, {"name": "x"}),
        ("ok == true", {"ok": True}, {"ok": False}),
        ("customer.tier == 2", {"customer": {"tier": 2}}, {"customer": {"tier": 3}}),
    ],
)
def test_guard_operators(
    condition: str, true_for: dict[str, Any], false_for: dict[str, Any]
) -> None:
    predicate = guard(condition)
    assert predicate(true_for) is True
    assert predicate(false_for) is False


@pytest.mark.parametrize(
    "condition",
    ["amount == 1", "amount != 1", "amount < 1", "amount >= 1", "amount in [1]", "a.b == 1"],
)
def test_a_missing_field_makes_a_comparison_false(condition: str) -> None:
    predicate = guard(condition)
    assert predicate({}) is False
    assert predicate({"a": 5}) is False  # "a" is not a dict: a.b is missing


def test_incomparable_types_are_false_not_errors() -> None:
    assert guard("amount > 10")({"amount": "lots"}) is False
    assert guard("amount < 10")({"amount": None}) is False
    assert guard("amount in 3")({"amount": 3}) is False
    assert guard('amount == "10"')({"amount": 10}) is False


def test_and_or_not_precedence() -> None:
    # and binds tighter than or: a or (b and c)
    p = guard("a == 1 or b == 1 and c == 1")
    assert p({"a": 1, "b": 0, "c": 0}) is True
    assert p({"a": 0, "b": 1, "c": 0}) is False
    assert p({"a": 0, "b": 1, "c": 1}) is True
    # parentheses override it
    p = guard("(a == 1 or b == 1) and c == 1")
    assert p({"a": 1, "b": 0, "c": 0}) is False
    assert p({"a": 1, "b": 0, "c": 1}) is True
    # not binds tighter than and
    p = guard("not a == 1 and b == 1")
    assert p({"a": 0, "b": 1}) is True
    assert p({"a": 1, "b": 1}) is False
    assert p({"a": 0, "b": 0}) is False
    # not over a missing field is true (the comparison is false)
    assert guard("not a == 1")({}) is True
    assert guard("not not a == 1")({"a": 1}) is True
    p = guard('amount > 10 and tier in ["a", "b"]')
    assert p({"amount": 11, "tier": "a"}) is True
    assert p({"amount": 11, "tier": "z"}) is False
    assert p({"tier": "a"}) is False


# -- scopes and resolution --------------------------------------------------------------------


def test_quoted_paths_for_source_and_target() -> None:
    text = """
    machine m {
      initial Outer
      state Outer { initial In1  state In1 { initial Deep  state Deep {} }  state In2 {} }
      state Other {}
      from Other to "Outer.In1" on Go
      from "Outer.In1.Deep" to Other on Stop
    }
    """
    defn = definition_from_dsl(text)
    go, stop = defn.root.transitions
    assert go.target is defn.node("Outer.In1")
    assert stop.source is defn.node("Outer.In1.Deep") and stop.target is defn.node("Other")
    assert defn.node("Outer.In1.Deep").outgoing() == [stop]


def test_target_resolution_is_innermost_first() -> None:
    text = """
    machine m {
      initial P
      state P {
        initial A
        state A {}
        state X {}
        from A to X on Inner
        from A to Y on Outer
        from A to P on Self
      }
      state X {}
      state Y {}
    }
    """
    defn = definition_from_dsl(text)
    inner, outer, self_ = defn.node("P").transitions
    assert inner.target is defn.node("P.X")  # not the machine-level X
    assert outer.target is defn.node("Y")
    assert self_.target is defn.node("P")
    assert all(t.source is defn.node("P.A") for t in (inner, outer, self_))


def test_transitions_inside_a_region_stay_in_the_region() -> None:
    text = ONBOARDING.replace(
        "from Waiting to Scored on ScoreReady",
        "from Waiting to Scored on ScoreReady\n                     from Scored to Waiting on Redo",
    )
    defn = definition_from_dsl(text, actions={"keep_score": keep_score})
    redo = defn.node("Checks.Credit").transitions[1]
    assert redo.target is defn.node("Checks.Credit.Waiting")


def test_composite_source_and_outgoing_order() -> None:
    text = """
    machine m {
      initial P
      state P { initial A  state A {}  state B {}  from A to B on Go }
      state Z {}
      from P to Z on Abort
      from "P.A" to Z on Go
    }
    """
    defn = definition_from_dsl(text)
    inner = defn.node("P").transitions[0]
    abort, outer = defn.root.transitions
    assert abort.source is defn.node("P")
    assert defn.node("P.A").outgoing() == [inner, outer]
    assert defn.node("P").outgoing() == [abort]


# -- machine selection, files, directories ----------------------------------------------------

MULTI = """
event Go {}
machine first { initial A state A {} }
machine second { initial B state B {} final C done from B to C on Go }
"""


def test_multi_machine_text_and_name_selection() -> None:
    assert definition_from_dsl(MULTI, "second").id == "second"
    assert definition_from_dsl(MULTI, "first").root.initial == "A"
    both = definitions_from_dsl(MULTI)
    assert list(both) == ["first", "second"]
    assert both["second"].events == {"Go": {}}
    error = dsl_error(MULTI)
    assert "several machines (first, second)" in error.message and "name=" in error.message
    error = dsl_error(MULTI, "third")
    assert "'third' not found" in error.message and "first, second" in error.message
    error = dsl_error("event Go {}")
    assert "no machine" in error.message


def test_only_the_selected_machine_needs_its_actions() -> None:
    text = MULTI.replace("state A {}", "state A { on enter unbound }")
    assert definition_from_dsl(text, "second").id == "second"
    with pytest.raises(DslError, match="unbound"):
        definition_from_dsl(text, "first")


def test_definition_from_dsl_file(tmp_path: Path) -> None:
    path = tmp_path / "parcel.stm"
    path.write_text(PARCEL)
    defn = definition_from_dsl_file(path, actions=PARCEL_ACTIONS)
    assert defn.id == "parcel"
    path.write_text("machine m {\n  initial A\n  state A { bogus }\n}\n")
    with pytest.raises(DslError) as info:
        definition_from_dsl_file(str(path))
    assert info.value.source_name == str(path)
    assert (info.value.line, info.value.column) == (3, 13)
    assert str(info.value).startswith(f"{path}:3:13: expected an item")


def test_definitions_from_dir(tmp_path: Path) -> None:
    (tmp_path / "a.stm").write_text(MULTI)
    (tmp_path / "b.stm").write_text(INVOICE)
    (tmp_path / "ignored.txt").write_text("not dsl at all {")
    found = definitions_from_dir(tmp_path)
    assert sorted(found) == ["first", "invoice", "second"]
    assert found["invoice"].events == {"Paid": {}}
    assert "Paid" not in found["first"].events
    (tmp_path / "c.stm").write_text("\n\nmachine invoice { initial X state X {} }")
    with pytest.raises(DslError) as info:
        definitions_from_dir(tmp_path)
    error = info.value
    assert str(tmp_path / "b.stm") in error.message and str(tmp_path / "c.stm") in error.message
    assert error.source_name == str(tmp_path / "c.stm")
    assert (error.line, error.column) == (3, 9)
    with pytest.raises(NotADirectoryError):
        definitions_from_dir(tmp_path / "a.stm")


def test_definitions_from_dir_reports_the_broken_file(tmp_path: Path) -> None:
    (tmp_path / "bad.stm").write_text("machine m { initial A state A {} from A to Nowhere }")
    with pytest.raises(DslError) as info:
        definitions_from_dir(tmp_path)
    assert info.value.source_name == str(tmp_path / "bad.stm")
    assert "Nowhere" in info.value.message


# -- errors -----------------------------------------------------------------------------------


def test_error_message_shows_line_and_caret() -> None:
    text = "machine m {\n  initial A\n  state A {}\n  from A to B on Go\n}"
    error = dsl_error(text)
    assert (error.line, error.column) == (4, 13)
    assert error.source_name == "<dsl>"
    assert str(error).splitlines() == [
        f"<dsl>:4:13: {error.message}",
        "      from A to B on Go",
        "                ^",
    ]
    assert isinstance(error, ValueError)


@pytest.mark.parametrize(
    ("text", "needle", "fragment", "occurrence"),
    [
        # lexical and syntax errors
        ("machine m { initial A state A {} } $", "$", "unexpected character '$'", 0),
        ('machine m { initial "A }', '"A', "unterminated string", 0),
        ("machine m { initial A state A {}\n  bogus }", "bogus", "expected an item", 0),
        ("machine m { initial A state A {} from A to B.C }", "B.C", 'quoted: write "B.C"', 0),
        ("machine m { initial A state A { on start x } }", "start", "'enter' or 'exit'", 0),
        ("machine m { initial A state A {} from A on Go }", "on Go", "'to' (or 'join')", 0),
        ("state A {}", "state", "'event' or 'machine'", 0),
        ("machine m { initial A state A {} from A to A on Go where x }", "}", "comparison", 1),
        ("machine m { initial A state A {} from A to A on Go where x == }", "}", "a literal", 1),
        ("machine m { initial A state A {} from A to A on Go where (x == 1 }", "}", "')'", 1),
        (
            "machine m { initial O orthogonal O { state R { initial X state X {} } } "
            "from O join all to O }",
            "}",
            "'else to STATE'",
            -1,
        ),
        # final without a verdict
        (
            "machine m { initial A state A {} final Done {} }",
            "{} }",
            "verdict after 'final Done'",
            0,
        ),
        ("machine m { initial A final Done\n from A to Done }", "from", "verdict", 0),
        # timeout
        ("machine m { initial A state A { timeout -5 } }", "-5", "must not be negative", 0),
        ("machine m { initial A state A { timeout soon } }", "soon", "'context KEY'", 0),
        # event declarations
        ("event Timeout {} machine m { initial A state A {} }", "Timeout", "reserved", 0),
        ("event Finished {}", "Finished", "reserved", 0),
        (
            "event Go { n: number } machine m { initial A state A {} }",
            "number",
            "unknown field type",
            0,
        ),
        ("event Go {} event Go {}", "Go", "declared twice", 1),
        # machines
        ("machine m { initial A state A {} } machine m { initial A state A {} }", "m", "twice", 3),
        ("machine m { }", "m", "no states", 1),
        ("machine m { initial A state A {} on enter x }", "on", "machine body", 0),
        # initial
        ("machine m { state A {} }", "m", "no 'initial'", 1),
        ("machine m { initial B state A {} }", "B", "names no child", 0),
        ("machine m { initial P state P { state A {} } }", "P", "no 'initial'", 1),
        ("machine m { initial P state P { initial Z state A {} } }", "Z", "names no child", 0),
        ("machine m { initial A state A { initial B } }", "initial B", "no child states", 0),
        (
            "machine m { initial O orthogonal O { initial R state R { initial X state X {} } } }",
            "initial R",
            "starts all of its regions",
            0,
        ),
        # duplicates
        ("machine m { initial A state A {} state A {} }", "A", "duplicate state 'A'", 2),
        ("machine m { initial A state A {} final A done }", "A", "duplicate state", 2),
        ("machine m { initial A initial A state A {} }", "initial", "duplicate 'initial'", 1),
        (
            "machine m { initial A state A { on enter x  on enter y } }",
            "on enter y",
            "duplicate 'on enter'",
            0,
        ),
        ("machine m { initial A state A { timeout 1 timeout 2 } }", "timeout 2", "duplicate", 0),
        ("machine m { initial A final A ok { outcome bad } }", "outcome", "already has", 0),
        # transitions in the wrong place
        ("machine m { initial A state A { from A to A } }", "from", "leaf state 'A'", 0),
        ("machine m { initial A final A ok { from A to A } }", "from", "leaf state", 0),
        (
            "machine m { initial O orthogonal O { state R { initial X state X {} } from R to R } }",
            "from",
            "directly inside orthogonal 'O'",
            0,
        ),
        # orthogonal children
        ("machine m { initial O orthogonal O { state R {} } }", "state R", "must be a region", 0),
        (
            "machine m { initial O orthogonal O { final R ok } }",
            "final R",
            "must be a region",
            0,
        ),
        (
            "machine m { initial O orthogonal O { orthogonal R { state S { initial X "
            "state X {} } } } }",
            "orthogonal R",
            "must be a region",
            0,
        ),
        ("machine m { initial O orthogonal O { } }", "O", "has no regions", 1),
        ("machine m { initial A final A ok { state B {} } }", "A", "cannot contain states", 1),
        # carry outside a region
        ("machine m { initial A state A { carry x } }", "carry", "belongs on a region", 0),
        # unknown source and target
        ("machine m { initial A state A {} from Nope to A on Go }", "Nope", "unknown source", 0),
        ("machine m { initial A state A {} from A to Nope on Go }", "Nope", "unknown target", 0),
        (
            "machine m { initial P state P { initial A state A {} } state Q {} from A to Q }",
            "A to",
            "unknown source",
            0,
        ),
        (
            'machine m { initial P state P { initial A state A {} } from "P.Z" to P }',
            '"P.Z"',
            "unknown source",
            0,
        ),
        (
            'machine m { initial P state P { initial A state A {} } state Q {} from Q to "A" }',
            '"A"',
            "unknown target",
            0,
        ),
        # join needs an orthogonal source
        (
            "machine m { initial A state A {} from A join any to A else to A }",
            "A join",
            "orthogonal",
            0,
        ),
        # a region's transitions stay inside the region
        (
            "machine m { initial O orthogonal O { state R { initial X state X {} from X to Out } } "
            "state Out {} }",
            "Out",
            "outside region 'O.R'",
            0,
        ),
        (
            "machine m { initial O orthogonal O { state R { initial P state P { initial X "
            "state X {} from X to O } } } }",
            "O }",
            "outside region 'O.R'",
            0,
        ),
        (
            "machine m { initial O orthogonal O { state R { initial X state X {} } } state Z {} "
            'from Z to "O.R.X" on Go }',
            '"O.R.X"',
            "inside region 'O.R'",
            0,
        ),
        (
            "machine m { initial O orthogonal O { state R { initial X state X {} } } state Z {} "
            'from "O.R.X" to Z on Go }',
            '"O.R.X"',
            "inside region 'O.R'",
            0,
        ),
        (
            "machine m { initial O orthogonal O { state R { initial X state X {} } } state Z {} "
            'from "O.R" to Z on Go }',
            '"O.R"',
            "inside region 'O.R'",
            0,
        ),
    ],
)
def test_structural_and_syntax_errors(
    text: str, needle: str, fragment: str, occurrence: int
) -> None:
    assert_error_at(text, needle, fragment, occurrence, actions={"x": _noop, "y": _noop})


def test_end_of_text_error_points_past_the_last_character() -> None:
    error = dsl_error("machine m { initial A state A {}\n  ")
    assert (error.line, error.column) == (2, 3)
    assert "found end of text" in error.message


def test_unbound_action_names_are_all_listed() -> None:
    text = (
        "machine m {\n initial A\n state A { on enter one  on exit pkg.two }\n"
        " state B { on enter three(n: 1) }\n}"
    )
    error = assert_error_at(text, "one", "unbound action names")
    assert "'one' (line 3)" in error.message and "'three' (line 4)" in error.message
    assert "pkg.two" not in error.message
    # the dotted name needs no binding; a bound name is fine
    defn = definition_from_dsl(text, actions={"one": _noop, "three": "x.three"})
    assert defn.node("A").on_exit.target == "pkg.two"  # type: ignore[union-attr]
    assert defn.node("B").on_enter.target == "x.three"  # type: ignore[union-attr]


def test_a_region_may_target_itself_and_reserved_kinds_work_as_triggers() -> None:
    text = """
    machine m {
      initial O
      orthogonal O {
        state R { initial X  state X {}  state Y {}
                  from X to R on Finished  from X to Y on Timeout }
      }
    }
    """
    defn = definition_from_dsl(text)
    to_region, to_y = defn.node("O.R").transitions
    assert to_region.target is defn.node("O.R")
    assert to_y.trigger.kinds == frozenset({"Timeout"})


_FRAGMENTS = [
    "machine", "m", "event", "Go", "{", "}", "initial", "A", "state", "final", "ok", "from",
    "to", "on", "where", "x", "==", "1", '"A.B"', "orthogonal", "join", "all", "else", "carry",
    "timeout", "-1", "no", "history", "|", "(", ")", "[", "]", ",", ":", "int", "?", "#", "\n",
    "and", "not", "in", "a.b", "$", '"',
]  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=40), st.booleans())
def test_any_text_either_compiles_or_raises_a_positioned_dsl_error(
    parts: list[str], wrap: bool
) -> None:
    text = " ".join(parts)
    if wrap:  # inside a valid machine body, so structural checks run too
        text = f"machine m {{ initial A state A {{}} state B {{ initial A state A {{}} {text} }} }}"
    try:
        definitions_from_dsl(text)
    except DslError as error:
        lines = text.split("\n")
        assert 1 <= error.line <= len(lines)
        assert 1 <= error.column <= len(lines[error.line - 1]) + 1
