"""Trace: contiguous store-assigned indices, the ``trace_max`` ring, ``append_trace`` rules."""

from __future__ import annotations

import pytest

from harel.conformance.suite._base import SMOKE, Kit, KitBase, new_exe, step, stored
from harel.store.contract import DEFAULT_TRACE_MAX
from harel.store.errors import ExecutionNotFound


class TraceTests(KitBase):
    """Per-execution trace rings."""

    async def test_default_trace_max(self, kit: Kit) -> None:
        assert kit.store.trace_max == DEFAULT_TRACE_MAX

    async def test_indices_contiguous_from_zero(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [], trace=step("Start", to_path="/a"))
        await kit.store.commit(exe, [], trace=step("Go", from_path="/a", to_path="/b"))
        await kit.store.commit(
            exe, [], trace=step("Go", from_path="/b", to_path="/c", actions=["m.f", "m.g"])
        )
        trace = await kit.store.read_trace("kit-1")
        assert [(t["index"], t["event_kind"], t["from_path"], t["to_path"]) for t in trace] == [
            (0, "Start", None, "/a"),
            (1, "Go", "/a", "/b"),
            (2, "Go", "/b", "/c"),
        ]
        assert trace[2]["actions"] == ["m.f", "m.g"]
        loaded = await kit.store.load("kit-1")
        assert loaded is not None and loaded.version == 3

    async def test_caller_index_is_ignored(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [], trace={**step("Start"), "index": 41})
        await kit.store.append_trace("kit-1", {**step("Manual"), "index": 7})
        await kit.store.commit(exe, [], trace={**step("Go"), "index": -3})
        trace = await kit.store.read_trace("kit-1")
        assert [(t["index"], t["event_kind"]) for t in trace] == [
            (0, "Start"),
            (1, "Manual"),
            (2, "Go"),
        ]

    async def test_steps_round_trip_exactly(self, kit: Kit) -> None:
        body = step(
            "Go",
            event_data={"k": [1, 2.5, None, "ü"]},
            from_path="/a",
            to_path="/b",
            actions=["pkg.mod.action"],
            context_out={"nested": {"x": True}},
            timestamp=1700000000.123456,
        )
        await kit.store.commit(new_exe("kit-1"), [], trace=body)
        assert await kit.store.read_trace("kit-1") == [{**body, "index": 0}]

    @SMOKE
    async def test_ring_keeps_last_trace_max(self, kit: Kit) -> None:
        kit.store.trace_max = 3
        exe = new_exe("kit-1")
        for n in range(6):
            await kit.store.commit(exe, [], trace=step("Go", n=n))
        trace = await kit.store.read_trace("kit-1")
        assert [(t["index"], t["n"]) for t in trace] == [(3, 3), (4, 4), (5, 5)]

    async def test_ring_applies_to_append_trace(self, kit: Kit) -> None:
        kit.store.trace_max = 2
        await stored(kit.store, new_exe("kit-1"))
        for n in range(5):
            await kit.store.append_trace("kit-1", step("Manual", n=n))
        assert [t["index"] for t in await kit.store.read_trace("kit-1")] == [3, 4]

    async def test_lowering_trace_max_trims_at_next_write(self, kit: Kit) -> None:
        kit.store.trace_max = 3
        exe = new_exe("kit-1")
        for _ in range(4):
            await kit.store.commit(exe, [], trace=step("Go"))
        assert [t["index"] for t in await kit.store.read_trace("kit-1")] == [1, 2, 3]
        kit.store.trace_max = 2
        await kit.store.commit(exe, [], trace=step("Go"))
        assert [t["index"] for t in await kit.store.read_trace("kit-1")] == [3, 4]
        kit.store.trace_max = 1
        await kit.store.append_trace("kit-1", step("Manual"))
        assert [t["index"] for t in await kit.store.read_trace("kit-1")] == [5]

    async def test_commit_without_trace_keeps_ring(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [], trace=step("Start"))
        await kit.store.commit(exe, [])
        await kit.store.commit(exe, [], trace=step("Go"))
        assert [t["index"] for t in await kit.store.read_trace("kit-1")] == [0, 1]

    async def test_rings_are_per_execution(self, kit: Kit) -> None:
        kit.store.trace_max = 2
        one, two = new_exe("kit-1"), new_exe("kit-2")
        for _ in range(3):
            await kit.store.commit(one, [], trace=step("Go"))
        await kit.store.commit(two, [], trace=step("Start"))
        assert [t["index"] for t in await kit.store.read_trace("kit-1")] == [1, 2]
        assert [t["index"] for t in await kit.store.read_trace("kit-2")] == [0]

    async def test_full_ring_of_large_steps(self, kit: Kit) -> None:
        """A full ring of ~100 KB steps is read back completely and in order."""
        kit.store.trace_max = 8
        exe = new_exe("kit-1")
        for n in range(10):
            await kit.store.commit(
                exe, [], trace=step("Go", n=n, context_out={"blob": str(n) * 100_000})
            )
        trace = await kit.store.read_trace("kit-1")
        assert [t["index"] for t in trace] == list(range(2, 10))
        for t in trace:
            assert t["context_out"]["blob"] == str(t["n"]) * 100_000

    @pytest.mark.parametrize("trace_max", [0, None])
    async def test_falsy_trace_max_keeps_every_step(self, kit: Kit, trace_max: int | None) -> None:
        """``trace_max`` 0 or ``None`` means no limit: more steps than the default all stay."""
        kit.store.trace_max = trace_max
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [], trace=step("Start"))
        for n in range(DEFAULT_TRACE_MAX + 1):
            await kit.store.append_trace("kit-1", step("Manual", n=n))
        trace = await kit.store.read_trace("kit-1")
        assert [t["index"] for t in trace] == list(range(DEFAULT_TRACE_MAX + 2))

    async def test_ring_of_one(self, kit: Kit) -> None:
        kit.store.trace_max = 1
        exe = new_exe("kit-1")
        for n in range(4):
            await kit.store.commit(exe, [], trace=step("Go", n=n))
            assert [(t["index"], t["n"]) for t in await kit.store.read_trace("kit-1")] == [(n, n)]
        await kit.store.append_trace("kit-1", step("Manual", n=9))
        assert [(t["index"], t["n"]) for t in await kit.store.read_trace("kit-1")] == [(4, 9)]

    async def test_ring_exactly_full_after_many_appends(self, kit: Kit) -> None:
        """At the boundary: exactly ``trace_max`` steps are all kept, one more drops one."""
        size = 7
        kit.store.trace_max = size
        await stored(kit.store, new_exe("kit-1"))
        written = 0
        for rounds in (1, 9):
            while written < rounds * size:
                await kit.store.append_trace("kit-1", step("Manual", n=written))
                written += 1
            kept = [t["index"] for t in await kit.store.read_trace("kit-1")]
            assert kept == list(range(written - size, written)), f"after {written} appends"
        await kit.store.append_trace("kit-1", step("Manual", n=written))
        kept = [t["index"] for t in await kit.store.read_trace("kit-1")]
        assert kept == list(range(written - size + 1, written + 1))

    async def test_append_trace_unknown_execution(self, kit: Kit) -> None:
        with pytest.raises(ExecutionNotFound) as info:
            await kit.store.append_trace("nobody", step("Manual"))
        assert isinstance(info.value, KeyError)
        assert await kit.store.read_trace("nobody") == []
        assert await kit.store.load("nobody") is None

    async def test_read_trace_unknown_is_empty(self, kit: Kit) -> None:
        assert await kit.store.read_trace("nobody") == []

    async def test_trace_does_not_change_load(self, kit: Kit) -> None:
        exe = new_exe("kit-1", context={"a": 1})
        await kit.store.commit(exe, [], trace=step("Start", context_out={"a": 2}))
        await kit.store.append_trace("kit-1", step("Manual"))
        loaded = await kit.store.load("kit-1")
        assert loaded is not None and (loaded.version, loaded.context) == (1, {"a": 1})
