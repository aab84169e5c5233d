"""The lease-listing scenario the backends' ``test_leases.py`` run: ``list_leases`` after
claims, a renewal, a release and a purge, on a fake clock, written once for sync and async
stores.

:func:`lease_scenario` is a sans-IO plan whose requests are store calls (:class:`StoreCall`);
:func:`run_lease_scenario` drives it over a sync store and :func:`arun_lease_scenario` over an
async one (:func:`harel.store.author.drive` / ``adrive``: a store's error is thrown into the
scenario, which expects it or lets it fail the test).  Each step asserts what the contract
says ``list_leases`` returns there.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from harel import Event, Execution, TimerOp
from harel.store.author import adrive, drive
from harel.store.contract import AsyncExecutionStore, ExecutionStore, Lease
from harel.store.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class StoreCall:
    """One contract call the scenario asks for: ``getattr(store, name)(*args, **knobs)``."""

    name: str
    args: tuple[Any, ...] = ()
    knobs: dict[str, Any] = field(default_factory=dict)


IDLE = "idle"
"""The execution whose timer is armed but never claimed in the scenario."""

Scenario = Generator[StoreCall, Any, None]
"""The scenario: yields store calls, is sent their results (or thrown their errors)."""


def _held(leases: list[Lease]) -> list[tuple[str | None, str, float]]:
    return [(lease.execution_id, lease.owner, lease.expires_at) for lease in leases]


def _listed(now: float, limit: int = 100) -> StoreCall:
    return StoreCall("list_leases", (now,), {"limit": limit})


def lease_scenario(first: str = "a", second: str = "b") -> Scenario:
    """Three groups leased on a fake clock, then read back after each change.

    ``first`` arms a timer at 1.0; ``second`` arms one at 2.0 and emits an untargeted event
    (the ``None`` group, whose entries live with ``second``).  At 10.0 ``w1`` claims two units
    for 5 s (the relay group ``None``, then ``first``: both expire at 15.0) and ``w2`` one for
    20 s (``second``, 30.0).  :data:`IDLE` arms a timer at 12.5 that nobody claims: its free
    work row, dated between ``now`` and the leases' expiries, is never listed (nor does it take
    the place of a lease when ``limit`` is 1).  Pick ids on different shards to test a sharded
    layout's merge.
    """
    untargeted = [(None, Event(kind="Ping"))]
    for fire_at, exe_id, emits in ((1.0, first, []), (2.0, second, untargeted), (12.5, IDLE, [])):
        exe = Execution(id=exe_id, definition_id="leases")
        yield StoreCall("commit", (exe, emits), {"timers": [TimerOp.schedule("/t", fire_at)]})
    claimed = yield StoreCall("claim", ("w1", 10.0), {"lease": 5.0, "limit": 2})
    assert [claim.execution_id for claim in claimed] == [None, first]
    claimed = yield StoreCall("claim", ("w2", 10.0), {"lease": 20.0, "limit": 1})
    assert [claim.execution_id for claim in claimed] == [second]

    both = [(None, "w1", 15.0), (first, "w1", 15.0), (second, "w2", 30.0)]
    assert _held((yield _listed(10.0))) == both  # by expiry, None first among equals
    assert _held((yield _listed(10.0, limit=1))) == both[:1]
    assert _held((yield _listed(15.0))) == both[2:]  # expired at 15.0, though not reclaimed
    assert _held((yield _listed(30.0))) == []

    assert (yield StoreCall("renew", ("w2", second, 12.0), {"lease": 40.0})) == 52.0
    assert (yield StoreCall("renew", ("w1", None, 12.0), {"lease": 8.0})) == 20.0
    renewed = [(first, "w1", 15.0), (None, "w1", 20.0), (second, "w2", 52.0)]
    assert _held((yield _listed(12.0))) == renewed

    yield StoreCall("release", ("w1", first))
    assert _held((yield _listed(12.0))) == renewed[1:]
    assert (yield StoreCall("purge", (second,), {"force": True})) is True
    assert _held((yield _listed(12.0))) == renewed[1:2]

    for now, limit in ((12.0, 0), (12.0, True), (12.0, 1.5), (float("nan"), 1)):
        try:
            yield _listed(now, limit)  # type: ignore[arg-type]  # refused arguments on purpose
        except InvalidArgument:
            continue
        raise AssertionError(f"list_leases({now!r}, limit={limit!r}) was not refused")
    assert _held((yield _listed(12.0))) == renewed[1:2]  # the refusals changed nothing


def run_lease_scenario(store: ExecutionStore, first: str = "a", second: str = "b") -> None:
    """:func:`lease_scenario` on a sync store (an empty one)."""
    drive(lease_scenario(first, second), lambda call: _bound(store, call)())


async def arun_lease_scenario(
    store: AsyncExecutionStore, first: str = "a", second: str = "b"
) -> None:
    """:func:`lease_scenario` on an async store (an empty one)."""
    await adrive(lease_scenario(first, second), lambda call: _bound(store, call)())


def _bound(store: object, call: StoreCall) -> Any:
    method = getattr(store, call.name)
    return lambda: method(*call.args, **call.knobs)


__all__ = [
    "IDLE",
    "Scenario",
    "StoreCall",
    "arun_lease_scenario",
    "lease_scenario",
    "run_lease_scenario",
]
