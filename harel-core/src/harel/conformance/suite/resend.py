"""Re-sent commits: a commit sent again after an unknown outcome answers as the original would.

A store keeps the receipt (commit token) of each of the last ``RECEIPT_WINDOW`` versions; a
commit whose CAS misses but whose token wrote the version it writes was already stored, so it
succeeds without writing anything again.  The re-send is simulated by putting ``exe.version``
back, exactly as the commit envelope does after ``CommitOutcomeUnknown``.
"""

from __future__ import annotations

from typing import Any

import pytest

from harel.conformance.suite._base import (
    FAR_FUTURE,
    SMOKE,
    Kit,
    KitBase,
    event,
    new_exe,
    step,
    stored,
)
from harel.model import Execution
from harel.store.common.commit import RECEIPT_WINDOW
from harel.store.contract import StoreConflict, TimerOp


def _step_args(tag: str) -> dict[str, Any]:
    """A commit with every kind of side write, named by ``tag``."""
    return {
        "emits": [(f"kit-target-{tag}", event(f"out-{tag}")), (None, event(f"bcast-{tag}"))],
        "processed_event_id": f"in-{tag}",
        "timers": (TimerOp.schedule(f"/t/{tag}", 50.0),),
        "spawns": [(f"child-{tag}", "/region", {"tag": tag})],
        "trace": step("Go", tag=tag),
    }


async def _resend(kit: Kit, exe: Execution, expected: int, args: dict[str, Any]) -> None:
    """Put ``exe.version`` back to ``expected`` (as after an unknown outcome) and send again."""
    exe.version = expected
    await kit.store.commit(exe, **args)


class ResendTests(KitBase):
    """A re-sent commit is recognised by its token, never applied twice, never misreported."""

    @SMOKE
    async def test_resent_commit_answers_success_and_writes_nothing_again(self, kit: Kit) -> None:
        exe = await stored(kit.store, new_exe("kit-1", context={"n": 0}))
        exe.context = {"n": 1}
        args = _step_args("a")
        await kit.store.commit(exe, **args)
        assert exe.version == 2
        await _resend(kit, exe, 1, args)
        assert exe.version == 2, "a re-sent stored commit must answer as the original did"
        loaded = await kit.store.load("kit-1")
        assert loaded is not None and loaded.version == 2 and loaded.context == {"n": 1}
        outbox = [entry.event.id for entry in await kit.store.pending_outbox()]
        assert outbox == ["out-a", "bcast-a"], f"emits written again by the re-send: {outbox}"
        spawns = [entry.child_id for entry in await kit.store.pending_spawns()]
        assert spawns == ["child-a"], f"spawns written again by the re-send: {spawns}"
        trace = [(t["index"], t["tag"]) for t in await kit.store.read_trace("kit-1")]
        assert trace == [(0, "a")], f"trace written again by the re-send: {trace}"
        assert await kit.store.due_timers(FAR_FUTURE) == [("kit-1", "/t/a", 50.0)]

    async def test_resent_insert_answers_success(self, kit: Kit) -> None:
        exe = new_exe("kit-1", context={"first": True})
        args = _step_args("create")
        await kit.store.commit(exe, **args)
        await _resend(kit, exe, 0, args)
        assert exe.version == 1
        outbox = [entry.event.id for entry in await kit.store.pending_outbox()]
        assert outbox == ["out-create", "bcast-create"]

    @SMOKE
    async def test_resend_after_a_rival_commit_is_still_recognised(self, kit: Kit) -> None:
        exe = await stored(kit.store, new_exe("kit-1", context={"by": "none"}))
        exe.context = {"by": "first"}
        first = _step_args("first")
        await kit.store.commit(exe, **first)
        rival = await kit.store.load("kit-1")
        assert rival is not None
        rival.context = {"by": "rival"}
        await kit.store.commit(rival, **_step_args("rival"))
        await _resend(kit, exe, 1, first)
        assert exe.version == 2, (
            "the re-sent commit was stored before the rival's: it must answer success, "
            "not StoreConflict (a caller would apply the step twice)"
        )
        loaded = await kit.store.load("kit-1")
        assert loaded is not None and loaded.version == 3 and loaded.context == {"by": "rival"}
        outbox = [entry.event.id for entry in await kit.store.pending_outbox()]
        assert outbox == ["out-first", "bcast-first", "out-rival", "bcast-rival"]

    async def test_resend_recognised_across_the_whole_receipt_window(self, kit: Kit) -> None:
        exe = await stored(kit.store, new_exe("kit-1"))
        exe.context = {"mine": True}
        mine: dict[str, Any] = {"emits": [], "trace": step("Mine")}
        await kit.store.commit(exe, **mine)
        other = await kit.store.load("kit-1")
        assert other is not None
        for n in range(RECEIPT_WINDOW - 1):
            other.context = {"n": n}
            await kit.store.commit(other, [])
        await _resend(kit, exe, 1, mine)
        assert exe.version == 2, (
            f"receipts of the last {RECEIPT_WINDOW} versions must be kept "
            f"(resent after {RECEIPT_WINDOW - 1} rival commits)"
        )

    async def test_changed_resend_is_a_conflict(self, kit: Kit) -> None:
        exe = await stored(kit.store, new_exe("kit-1"))
        exe.context = {"v": 1}
        await kit.store.commit(exe, [(None, event("e-1"))])
        exe.version = 1
        exe.context = {"v": "changed"}
        with pytest.raises(StoreConflict) as raised:
            await kit.store.commit(exe, [(None, event("e-1"))])
        assert raised.value.found == 2
        assert exe.version == 1
        loaded = await kit.store.load("kit-1")
        assert loaded is not None and loaded.context == {"v": 1}

    async def test_same_commit_from_another_copy_is_a_conflict(self, kit: Kit) -> None:
        exe = await stored(kit.store, new_exe("kit-1"))
        copy = await kit.store.load("kit-1")
        assert copy is not None
        args: dict[str, Any] = {"emits": [(None, event("e-same"))], "trace": step("Same")}
        await kit.store.commit(exe, **args)
        with pytest.raises(StoreConflict):
            await kit.store.commit(copy, **args)
        assert [e.event.id for e in await kit.store.pending_outbox()] == ["e-same"]
