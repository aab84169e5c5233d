"""docs/dsl.md against the compiler: every example compiles, every counter-example is refused.

A ```` ```stm ```` block must compile with ``definitions_from_dsl`` (bare action names are
bound to a no-op); a ```` ```stm-error ```` block must raise :class:`DslError` whose message
contains the text quoted on the ``→`` line after it.  The page must also show every item
keyword the parser knows, so a new construct cannot go undocumented.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harel import DictStore, DurableRunner, Event, Execution, Status
from harel.engine import DslError, definition_from_dsl
from harel.engine._dsl_parser import ITEM_KEYWORDS, RESERVED_KINDS
from harel.engine.dsl import definitions_from_dsl

DOC = Path(__file__).resolve().parents[3] / "docs" / "dsl.md"
TEXT = DOC.read_text(encoding="utf-8")
_BLOCK = re.compile(r"^```(stm|stm-error)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)
_EXPECTED = re.compile(r"\A\s*→ `([^`]+)`")


def _noop(stm: Any, event: Any, **inputs: Any) -> None:
    return None


def _bound(source: str) -> dict[str, Callable[..., Any]]:
    """A no-op for every bare action name of ``source`` (the examples' handlers are made up)."""
    names = re.findall(r"\bon\s+(?:enter|exit)\s+([A-Za-z_][A-Za-z0-9_]*)\b(?!\.)", source)
    return dict.fromkeys(names, _noop)


def _blocks(kind: str) -> list[tuple[int, str, str]]:
    """(line, source, text after the block) of every ``kind`` fence in the page."""
    found = []
    for match in _BLOCK.finditer(TEXT):
        if match.group(1) == kind:
            line = TEXT.count("\n", 0, match.start()) + 1
            found.append((line, match.group(2), TEXT[match.end() :]))
    return found


EXAMPLES = _blocks("stm")
COUNTER_EXAMPLES = _blocks("stm-error")


def test_the_page_has_examples_and_counter_examples() -> None:
    assert len(EXAMPLES) >= 12
    assert len(COUNTER_EXAMPLES) >= 5


@pytest.mark.parametrize(("line", "source", "_after"), EXAMPLES, ids=lambda v: str(v)[:0])
def test_every_example_compiles(line: int, source: str, _after: str) -> None:
    compiled = definitions_from_dsl(source, actions=_bound(source), source_name=f"dsl.md:{line}")
    assert compiled, f"dsl.md line {line}: no machine"
    for name, definition in compiled.items():
        assert definition.id == name
        assert definition_from_dsl(source, name, actions=_bound(source)).index.keys() == (
            definition.index.keys()
        )


@pytest.mark.parametrize(("line", "source", "after"), COUNTER_EXAMPLES, ids=lambda v: str(v)[:0])
def test_every_counter_example_is_refused_as_shown(line: int, source: str, after: str) -> None:
    expected = _EXPECTED.match(after)
    assert expected, f"dsl.md line {line}: a stm-error block needs a '→ `message`' line after it"
    with pytest.raises(DslError) as caught:
        definitions_from_dsl(source, actions=_bound(source))
    assert expected.group(1) in caught.value.message, (line, caught.value.message)


def test_the_page_shows_every_construct() -> None:
    code = " ".join(source for _, source, _ in EXAMPLES)
    words = set(re.findall(r"[A-Za-z_]+|==|!=|<=|>=|[<>|(\[]", code))
    constructs = {
        *ITEM_KEYWORDS,
        *("event", "machine", "to", "join", "all", "any", "else", "where", "enter", "exit"),
        *("and", "or", "not", "in", "==", "!=", "<", "<=", ">", ">=", "|", "(", "["),
        *("history", "context", "true", "false", "Timeout"),
    }
    assert constructs - words == set(), "docs/dsl.md has no example of these"
    assert re.search(r'"[A-Za-z_]+\.[A-Za-z_.]+"', code), "no quoted state path"
    assert re.search(r"\b[a-z_]+\.[a-z_]+\.[a-z_]+\b", code), "no dotted action"
    for kind in RESERVED_KINDS:
        assert kind in TEXT, f"the reserved kind {kind} is not named"


def test_the_error_format_shown_is_the_compilers() -> None:
    (shown,) = re.findall(r"^```text\n(<dsl>:.*?)^```\n", TEXT, re.MULTILINE | re.DOTALL)
    source = shown.splitlines()[1].strip()
    with pytest.raises(DslError) as caught:
        definition_from_dsl(source)
    assert str(caught.value) == shown.rstrip("\n")


def _example(machine: str) -> str:
    (source,) = [s for _, s, _ in EXAMPLES if re.search(rf"\bmachine {machine}\b", s)]
    return source


def _run(machine: str, events: list[Event], actions: dict[str, Any] | None = None) -> Execution:
    source = _example(machine)
    runner = DurableRunner(DictStore(), definitions_from_dsl(source, actions=actions or {}))
    exe = runner.create(machine)
    for event in events:
        exe = runner.process(exe.id, event)
    return exe


@pytest.mark.parametrize(
    ("data", "end"),
    [
        ({"amount": 5000, "country": "FR"}, "Manual"),
        ({"amount": 10, "country": "US"}, "Manual"),
        ({"amount": 20, "country": "FR", "gift": True}, "Wrapped"),
        ({"amount": 200, "country": "DE", "customer": {"tier": "gold", "blocked": 0}}, "Express"),
        ({"amount": 200, "country": "DE", "customer": {"tier": "gold"}}, "Standard"),
    ],
)
def test_the_guard_example_routes_as_described(data: dict[str, Any], end: str) -> None:
    assert _run("triage", [Event(kind="Order", data=data)]).active_path == end


def test_the_described_behaviour_of_the_examples() -> None:
    lost = _run("parcel", [Event(kind="Begin"), Event(kind="Lost")])
    assert (lost.status, lost.outcome) == (Status.DONE, "lost")
    resumed = _run("wizard", [Event(kind="Next"), Event(kind="Pause"), Event(kind="Resume")])
    assert resumed.active_path == "Steps.One"
    assert _run("scopes", [Event(kind="Skip")]).active_path == "Sent"
    assert _run("scopes", [Event(kind="Next"), Event(kind="Abort")]).active_path == "Cancelled"
    filed = _run("form", [Event(kind="Poke"), Event(kind="Submit"), Event(kind="Retry")])
    assert (filed.status, filed.active_path) == (Status.DONE, "Filed")
    shipped = _run("fulfilment", [Event(kind="Pay"), Event(kind="Pack")])
    assert (shipped.active_path, shipped.outcome) == ("Shipped", "success")


def test_the_region_example_joins_with_the_carried_score() -> None:
    def keep_score(stm: Any, event: Event, **_: Any) -> None:
        stm.execution_ctx.update(score=event.data["score"])

    exe = _run(
        "onboarding",
        [Event(kind="IdOk"), Event(kind="ScoreReady", data={"score": 700})],
        {"keep_score": keep_score},
    )
    assert (exe.status, exe.active_path, exe.outcome) == (Status.DONE, "Accepted", "success")
    assert exe.context["region_results"] == {
        "Checks.Identity": {"outcome": "success"},
        "Checks.Credit": {"outcome": "success", "score": 700},
    }
