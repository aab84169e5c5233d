"""Timers: arm, re-arm, cancel, the guarded delete, ordering and bit-exact ``fire_at``."""

from __future__ import annotations

import math
import struct

import pytest

from harel.conformance.suite._base import FAR_FUTURE, SMOKE, Kit, KitBase, new_exe, stored
from harel.store.contract import TimerOp

AWKWARD_FLOATS = (
    0.1 + 0.2,
    1e-300,
    5e-324,
    2.0**53 + 1.0,
    2.0**53 - 1.0,
    1700000000.123456789,
    1700000000.1234567,
    -0.0,
    0.0,
    -1.5,
    2.0**56 + 16.0,
    1e17 + 0.5,
    1 / 3,
    math.pi * 1e9,
)


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


def _stored(value: float) -> float:
    """What a store keeps of ``fire_at``: the value itself, bit for bit, but ``-0.0`` as ``0.0``
    (the commit envelope normalises the sign of zero, which not every database keeps)."""
    return 0.0 if value == 0.0 else value


class TimerTests(KitBase):
    """The timer table keyed by ``(execution_id, path)``."""

    async def test_not_due_before_due_at_and_after(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [], timers=(TimerOp.schedule("/wait", 100.0),))
        assert await kit.store.due_timers(99.999) == []
        due = await kit.store.due_timers(100.0)
        assert due == [("kit-1", "/wait", 100.0)]
        assert all(type(value) is float for _, _, value in due)
        assert await kit.store.due_timers(1e9) == [("kit-1", "/wait", 100.0)]

    async def test_reschedule_replaces(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [], timers=(TimerOp.schedule("/wait", 100.0),))
        await kit.store.commit(exe, [], timers=(TimerOp.schedule("/wait", 200.0),))
        assert await kit.store.due_timers(150.0) == []
        assert await kit.store.due_timers(FAR_FUTURE) == [("kit-1", "/wait", 200.0)]

    async def test_cancel_removes_and_unknown_cancel_is_noop(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(
            exe, [], timers=(TimerOp.schedule("/a", 1.0), TimerOp.schedule("/b", 2.0))
        )
        await kit.store.commit(exe, [], timers=(TimerOp.cancel("/a"), TimerOp.cancel("/never")))
        assert await kit.store.due_timers(FAR_FUTURE) == [("kit-1", "/b", 2.0)]

    async def test_cancel_then_rearm_in_one_commit(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [], timers=(TimerOp.schedule("/retry", 10.0),))
        await kit.store.commit(
            exe, [], timers=(TimerOp.cancel("/retry"), TimerOp.schedule("/retry", 20.0))
        )
        assert await kit.store.due_timers(FAR_FUTURE) == [("kit-1", "/retry", 20.0)]

    async def test_rearm_then_cancel_in_one_commit(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [], timers=(TimerOp.schedule("/retry", 10.0),))
        await kit.store.commit(
            exe, [], timers=(TimerOp.schedule("/retry", 20.0), TimerOp.cancel("/retry"))
        )
        assert await kit.store.due_timers(FAR_FUTURE) == []

    async def test_last_op_per_path_wins_on_insert(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(
            exe,
            [],
            timers=(
                TimerOp.schedule("/x", 5.0),
                TimerOp.schedule("/y", 6.0),
                TimerOp.cancel("/x"),
                TimerOp.schedule("/x", 7.0),
                TimerOp.schedule("/y", 8.0),
                TimerOp.cancel("/z"),
                TimerOp.schedule("/z", 9.0),
                TimerOp.cancel("/z"),
            ),
        )
        assert await kit.store.due_timers(FAR_FUTURE) == [
            ("kit-1", "/x", 7.0),
            ("kit-1", "/y", 8.0),
        ]

    @SMOKE
    async def test_delete_timer_guarded_by_fire_at(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [], timers=(TimerOp.schedule("/wait", 100.0),))
        await kit.store.delete_timer("kit-1", "/wait", 99.0)  # a sweep that read an old time
        await kit.store.delete_timer("kit-1", "/wait", math.nextafter(100.0, math.inf))
        await kit.store.delete_timer("kit-1", "/other", 100.0)
        await kit.store.delete_timer("kit-2", "/wait", 100.0)
        assert await kit.store.due_timers(FAR_FUTURE) == [("kit-1", "/wait", 100.0)]
        await kit.store.delete_timer("kit-1", "/wait", 100.0)
        assert await kit.store.due_timers(FAR_FUTURE) == []
        await kit.store.delete_timer("kit-1", "/wait", 100.0)  # already gone: no-op

    async def test_delete_after_rearm_keeps_the_new_time(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [], timers=(TimerOp.schedule("/wait", 100.0),))
        (swept,) = await kit.store.due_timers(150.0)
        await kit.store.commit(exe, [], timers=(TimerOp.schedule("/wait", 300.0),))
        await kit.store.delete_timer(*swept)
        assert await kit.store.due_timers(FAR_FUTURE) == [("kit-1", "/wait", 300.0)]

    async def test_fire_at_bit_exact(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        ops = tuple(TimerOp.schedule(f"/t{n:02d}", value) for n, value in enumerate(AWKWARD_FLOATS))
        await kit.store.commit(exe, [], timers=ops)
        due = {path: value for _, path, value in await kit.store.due_timers(FAR_FUTURE)}
        assert len(due) == len(AWKWARD_FLOATS)
        for n, value in enumerate(AWKWARD_FLOATS):
            got = due[f"/t{n:02d}"]
            expected = _stored(value)
            assert type(got) is float
            assert _bits(got) == _bits(expected), f"fire_at {value!r} came back as {got!r}"
            assert str(got) == str(expected)  # the Timeout event id embeds str(fire_at)
        for n, value in enumerate(AWKWARD_FLOATS):
            if value != 0.0:  # 0.0 == -0.0, so a neighbour test is meaningless there
                await kit.store.delete_timer("kit-1", f"/t{n:02d}", math.nextafter(value, math.inf))
        assert len(await kit.store.due_timers(FAR_FUTURE)) == len(AWKWARD_FLOATS)
        for n, value in enumerate(AWKWARD_FLOATS):
            await kit.store.delete_timer("kit-1", f"/t{n:02d}", value)
        assert await kit.store.due_timers(FAR_FUTURE) == []

    @SMOKE
    async def test_due_order_and_limit(self, kit: Kit) -> None:
        """Ascending by ``(fire_at, execution_id, path)``; ``limit`` takes the first n."""
        a, b = new_exe("kit-a"), new_exe("kit-b")
        await kit.store.commit(
            b, [], timers=(TimerOp.schedule("/z", 5.0), TimerOp.schedule("/a", 5.0))
        )
        await kit.store.commit(
            a,
            [],
            timers=(
                TimerOp.schedule("/late", 9.0),
                TimerOp.schedule("/m", 5.0),
                TimerOp.schedule("/early", 1.0),
            ),
        )
        expected = [
            ("kit-a", "/early", 1.0),
            ("kit-a", "/m", 5.0),
            ("kit-b", "/a", 5.0),
            ("kit-b", "/z", 5.0),
            ("kit-a", "/late", 9.0),
        ]
        assert await kit.store.due_timers(FAR_FUTURE) == expected
        assert await kit.store.due_timers(FAR_FUTURE, limit=3) == expected[:3]
        assert await kit.store.due_timers(5.0, limit=10) == expected[:4]
        assert await kit.store.due_timers(FAR_FUTURE, limit=1) == expected[:1]

    async def test_same_path_on_two_executions(self, kit: Kit) -> None:
        one, two = new_exe("kit-1"), new_exe("kit-2")
        await kit.store.commit(one, [], timers=(TimerOp.schedule("/wait", 1.0),))
        await kit.store.commit(two, [], timers=(TimerOp.schedule("/wait", 2.0),))
        await kit.store.commit(one, [], timers=(TimerOp.cancel("/wait"),))
        assert await kit.store.due_timers(FAR_FUTURE) == [("kit-2", "/wait", 2.0)]

    async def test_timers_only_through_commit(self, kit: Kit) -> None:
        """A save (``commit(exe, [])``) leaves armed timers alone."""
        exe = await stored(kit.store, new_exe("kit-1"))
        await kit.store.commit(exe, [], timers=(TimerOp.schedule("/wait", 3.0),))
        await kit.store.save(exe)
        assert await kit.store.due_timers(FAR_FUTURE) == [("kit-1", "/wait", 3.0)]

    def test_invalid_timer_op_rejected_at_construction(self) -> None:
        with pytest.raises(ValueError):
            TimerOp("arm", "/x", 1.0)  # type: ignore[arg-type]
        for bad in (math.nan, math.inf, -math.inf):
            with pytest.raises(ValueError):
                TimerOp.schedule("/x", bad)
        with pytest.raises(TypeError):
            TimerOp.schedule("/x", "10")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            TimerOp.schedule(3, 1.0)  # type: ignore[arg-type]
        assert type(TimerOp.schedule("/x", 10).fire_at) is float

    async def test_timer_keys_holding_pattern_characters_match_exactly(self, kit: Kit) -> None:
        """Timer keys with ``%``, ``_``, ``\\``, ``*``, ``?``, ``[``, ``{``, ``:`` are plain
        text: ``delete_timer`` disarms exactly its own (execution id, path) and nothing else."""
        chars = ("%", "_", "\\", "*", "?", "[", "{", ":")
        keys = [(f"k{c}", f"/p{c}") for c in chars] + [("k", "/p"), ("kx", "/px"), ("K", "/P")]
        keys += [("x:y", "z"), ("x", "y:z")]
        armed = {key: float(n + 1) for n, key in enumerate(keys)}
        for (execution_id, path), fire_at in armed.items():
            exe = (await kit.store.load(execution_id)) or new_exe(execution_id)
            await kit.store.commit(exe, [], timers=(TimerOp.schedule(path, fire_at),))
        for execution_id, path in keys:  # every cross pairing, each with the fire_at of a timer
            for other_id, other_path in keys:
                if (other_id, other_path) != (execution_id, path):
                    fire_at = armed[(other_id, other_path)]
                    await kit.store.delete_timer(execution_id, other_path, fire_at)
                    await kit.store.delete_timer(other_id, path, fire_at)
        due = await kit.store.due_timers(FAR_FUTURE)
        assert sorted(due) == sorted((i, p, at) for (i, p), at in armed.items())
        for (execution_id, path), fire_at in armed.items():
            await kit.store.delete_timer(execution_id, path, fire_at)
            remaining = {(i, p) for i, p, _ in await kit.store.due_timers(FAR_FUTURE)}
            assert (execution_id, path) not in remaining
        assert await kit.store.due_timers(FAR_FUTURE) == []
