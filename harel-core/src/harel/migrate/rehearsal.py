"""Rehearse a migration between two stores with a population the runner itself produced.

:func:`rehearse` builds executions mid-flight on ``src`` (armed timers, pending spawn intents,
pending relays, one relay-only record, orthogonal children, finished executions), migrates
them to ``dst``, checks that a second run moves nothing and that verification passes, then
continues the same script on both stores and compares: same final states, each timer fired
once, each effect run once.  The test suites and ``make reliability`` run it over pairs of
backends; it can rehearse a real pair of stores too (both must start empty).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harel.engine.definition import Definition
from harel.engine.dsl import definition_from_dsl
from harel.engine.runner import DurableRunner
from harel.migrate._checks import require_records
from harel.migrate._copy import migrate
from harel.migrate._ids import listed_ids
from harel.model import Event, Status
from harel.store.common.records import trim_record_trace
from harel.store.contract import ExecutionRecord, ExecutionStore

START = 1_700_000_000.0
"""The simulated clock's first reading (epoch seconds)."""

MACHINES = """
event Confirm {}
event Pay { amount: float }
event Pack {}
machine order {
  initial Placed
  state Placed { timeout 900  on enter effect }
  orthogonal Fulfilment {
    state Payment {
      carry amount
      initial Charging
      state Charging {}
      final Charged success { on enter charge }
      from Charging to Charged on Pay
    }
    state Warehouse {
      initial Picking
      state Picking {}
      final Packed success { on enter effect }
      from Picking to Packed on Pack
    }
  }
  state Shipping { timeout 7200  on enter effect }
  final Delivered success { on enter effect }
  final Expired expired { on enter effect }
  final Failed failed {}
  from Placed to Fulfilment on Confirm
  from Placed to Expired on Timeout
  from Fulfilment join all to Shipping else to Failed
  from Shipping to Delivered on Timeout
}
machine customer {
  initial Paid
  final Paid success { on enter pay }
}
"""
"""An order (a timer, an orthogonal fork and join, another timer) and a customer whose start
sends ``Pay`` to an order's payment region (through the outbox)."""

_RANDOM_ID = re.compile(r"[0-9a-f]{32}")


class Clock:
    """A simulated clock: moves only when told to."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Effects:
    """What the actions did: one ``(execution id, action, idempotency key)`` per call."""

    calls: list[tuple[str, str, str]] = field(default_factory=list)

    def actions(self) -> dict[str, Callable[..., None]]:
        """The actions of :data:`MACHINES`, recording into this object."""

        def effect(stm: Any, event: Event | None, **_: Any) -> None:
            self.calls.append((stm.execution_id, "effect", stm.idempotency_key))

        def charge(stm: Any, event: Event | None, **_: Any) -> None:
            self.calls.append((stm.execution_id, "charge", stm.idempotency_key))
            if event is not None:
                stm.execution_ctx["amount"] = event.data.get("amount")

        def pay(stm: Any, event: Event | None, **_: Any) -> None:
            self.calls.append((stm.execution_id, "pay", stm.idempotency_key))
            to = stm.execution_ctx["to"]
            stm.send(to, Event(id=f"pay-{stm.execution_id}", kind="Pay", data={"amount": 5.0}))

        return {"effect": effect, "charge": charge, "pay": pay}

    def duplicates(self) -> list[tuple[str, str, str]]:
        """Calls made more than once (an effect run twice)."""
        return sorted(call for call, n in Counter(self.calls).items() if n > 1)


def definitions(effects: Effects) -> dict[str, Definition]:
    """The machines of :data:`MACHINES`, their actions recording into ``effects``."""
    actions = effects.actions()
    return {
        name: definition_from_dsl(MACHINES, name, actions=actions) for name in ("order", "customer")
    }


def _runner(store: ExecutionStore, clock: Clock, effects: Effects) -> DurableRunner:
    return DurableRunner(store, definitions(effects), clock=clock, trace=True)


def _go(runner: DurableRunner, execution_id: str, kind: str, *, relay: bool = True) -> None:
    data = {"amount": 12.5} if kind == "Pay" else {}
    event = Event(id=f"{kind.lower()}-{execution_id}", kind=kind, data=data)
    runner.process(execution_id, event, _relay=relay)


def populate(store: ExecutionStore, *, scale: int = 1) -> float:
    """Leave ``scale`` executions of each kind mid-flight in ``store``; the clock's end time.

    Per ``i``: ``done-i`` (delivered, long trace), ``placed-i`` (expiry timer armed),
    ``forked-i`` (two region children waiting), ``paying-i`` (a child's ``Finished`` pending in
    the outbox), ``shipping-i`` (delivery timer armed), ``spawning-i`` (spawn intents pending)
    with ``customer-i`` (its ``Pay`` to the unborn payment region pending: a relay-only id).
    """
    clock = Clock()
    runner = _runner(store, clock, Effects())
    for i in range(scale):
        runner.create("order", execution_id=f"done-{i}")
        for kind in ("Confirm", "Pay", "Pack"):
            clock.now += 60
            _go(runner, f"done-{i}", kind)
    clock.now += 7300
    runner.fire_due_timers()
    for i in range(scale):
        for name in ("placed", "forked", "paying", "shipping", "spawning"):
            runner.create("order", execution_id=f"{name}-{i}")
        clock.now += 60
        for name in ("forked", "paying", "shipping"):
            _go(runner, f"{name}-{i}", "Confirm")
        clock.now += 60
        _go(runner, f"shipping-{i}", "Pay")
        _go(runner, f"shipping-{i}", "Pack")
    # Last, the steps whose relays stay pending (any relayed step drains the whole store).
    for i in range(scale):
        _go(runner, f"paying-{i}", "Pay", relay=False)
        _go(runner, f"spawning-{i}", "Confirm", relay=False)
        runner.create(
            "customer",
            {"to": f"spawning-{i}:Fulfilment.Payment:0"},
            execution_id=f"customer-{i}",
            _relay=False,
        )
    return clock.now


def carry_on(store: ExecutionStore, start: float, *, scale: int = 1) -> Effects:
    """Continue the population of :func:`populate` to its end on ``store``: the relays, the
    remaining events, then every timer.  Returns what the actions did meanwhile."""
    clock, effects = Clock(start), Effects()
    runner = _runner(store, clock, effects)
    runner.recover()
    for i in range(scale):
        clock.now += 60
        _go(runner, f"forked-{i}", "Pay")
        for name in ("forked", "paying", "spawning"):
            _go(runner, f"{name}-{i}", "Pack")
    for _ in range(2):
        clock.now += 10_000
        runner.run_until_idle()
    return effects


def _view(record: ExecutionRecord, trace_max: int | None) -> dict[str, Any]:
    """The run-independent part of a record (engine-made ``Finished`` ids are random)."""
    record = trim_record_trace(record, trace_max)
    marks = [event_id for event_id, _ in record.processed]
    exe = record.execution
    return {
        "execution": None if exe is None else exe.model_dump(mode="json"),
        "marks": sorted(m for m in marks if not _RANDOM_ID.fullmatch(m)),
        "random_marks": sum(1 for m in marks if _RANDOM_ID.fullmatch(m)),
        "timers": list(record.timers),
        "relays": (len(record.outbox), len(record.spawns)),
        "trace": list(record.trace),
    }


def final_views(store: ExecutionStore, trace_max: int | None) -> dict[str, dict[str, Any]]:
    """:func:`_view` of every listed execution, by id."""
    views = {}
    for execution_id in listed_ids(store):
        record = store.export_execution(execution_id)
        if record is not None:
            views[execution_id] = _view(record, trace_max)
    return views


def _timeouts(views: Mapping[str, dict[str, Any]]) -> Counter[tuple[str, str]]:
    return Counter(
        (key, str(step.get("from_path")))
        for key, view in views.items()
        for step in view["trace"]
        if step.get("event_kind") == "Timeout"
    )


def _symmetric(left: Counter[Any], right: Counter[Any]) -> list[Any]:
    return sorted(((left - right) + (right - left)).elements())


@dataclass
class Rehearsal:
    """What :func:`rehearse` moved (``records``) and found wrong (``problems``)."""

    records: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing found wrong."""
        return not self.problems


def _migration_problems(src: ExecutionStore, dst: ExecutionStore, result: Rehearsal) -> None:
    first = migrate(src, dst)
    result.records = len(first.moved_ids)
    if not first.ok or not first.moved_ids:
        result.problems.append(f"first run: {first.summary()}")
    if first.verification is not None and not first.verification.ok:
        result.problems.append(f"first run: {first.verification.summary()}")
    again = migrate(src, dst, check=False)
    if again.moved_ids or not again.ok:
        result.problems.append(f"second run moved or refused something: {again.summary()}")


def _ending_problems(
    left: Mapping[str, dict[str, Any]], right: Mapping[str, dict[str, Any]]
) -> list[str]:
    problems = []
    if left.keys() != right.keys():
        problems.append(
            f"ids differ: only source {sorted(left.keys() - right.keys())}, "
            f"only destination {sorted(right.keys() - left.keys())}"
        )
    for key in sorted(left.keys() & right.keys()):
        if left[key] != right[key]:
            parts = sorted(name for name in left[key] if left[key][name] != right[key].get(name))
            problems.append(f"{key} ended differently on the destination: {', '.join(parts)}")
    for key, view in right.items():
        exe = view["execution"]
        status = None if exe is None else exe["status"]
        if ":" not in key and status != Status.DONE.value:
            problems.append(f"{key} did not finish on the destination: {status}")
    for where, views in (("source", left), ("destination", right)):
        twice = [ref for ref, n in _timeouts(views).items() if n > 1]
        if twice:
            problems.append(f"timers fired twice on the {where}: {twice}")
    return problems


def _effect_problems(on_src: Effects, on_dst: Effects) -> list[str]:
    problems = [
        f"effects ran twice on the {where}: {effects.duplicates()}"
        for where, effects in (("source", on_src), ("destination", on_dst))
        if effects.duplicates()
    ]
    if Counter(on_src.calls) != Counter(on_dst.calls):
        problems.append(
            f"effects differ: source {len(on_src.calls)}, destination {len(on_dst.calls)}: "
            f"{_symmetric(Counter(on_src.calls), Counter(on_dst.calls))[:5]}"
        )
    return problems


def rehearse(src: ExecutionStore, dst: ExecutionStore, *, scale: int = 1) -> Rehearsal:
    """Populate ``src``, migrate to ``dst``, continue on both; what moved and what went wrong.

    Both stores must start empty.  Checked: the migration moves every record and verifies;
    a second run moves nothing; after the continuation both stores hold the same final
    executions, traces, timers and relays, every order finished, no timer fired twice and no
    effect ran twice, and the destination ran exactly the effects the source ran.
    """
    require_records(src, "source")
    require_records(dst, "destination")
    start = populate(src, scale=scale)
    result = Rehearsal()
    _migration_problems(src, dst, result)
    on_src, on_dst = carry_on(src, start, scale=scale), carry_on(dst, start, scale=scale)
    trace_max = min((m for m in (src.trace_max, dst.trace_max) if m), default=None)
    result.problems += _ending_problems(final_views(src, trace_max), final_views(dst, trace_max))
    result.problems += _effect_problems(on_src, on_dst)
    return result
