"""Dedupe: processed marks keyed by ``(execution_id, event_id)`` and ``load_for_event``."""

from __future__ import annotations

from harel.conformance.suite._base import SMOKE, Kit, KitBase, new_exe, stored

PATTERN_CHARS = ("%", "_", "\\", "*", "?", "[", "{", ":")
"""Characters a LIKE, GLOB, regex, hash-tag or ``:``-joined key treats specially."""

LOOKALIKE_IDS = ("k", "kx", "K", *(f"k{char}" for char in PATTERN_CHARS))
LOOKALIKE_EVENTS = ("e", "ex", "E", *(f"e{char}" for char in PATTERN_CHARS))
JOINED = (("x:y", "z"), ("x", "y:z"), ("x:y:z", "w"), ("x", "y"))
"""(execution id, event id) pairs whose ``id:event`` keys would collide."""


class DedupeTests(KitBase):
    """``is_processed`` and ``load_for_event``."""

    async def test_processed_marks(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [], processed_event_id="e-1")
        assert await kit.store.is_processed("kit-1", "e-1") is True
        assert await kit.store.is_processed("kit-1", "e-2") is False
        assert await kit.store.is_processed("kit-2", "e-1") is False
        # marking the same event again is refused (AlreadyProcessed: the FenceTests)
        await kit.store.commit(exe, [], processed_event_id="e-2")
        assert await kit.store.is_processed("kit-1", "e-1") is True
        assert await kit.store.is_processed("kit-1", "e-2") is True

    async def test_marks_are_per_execution(self, kit: Kit) -> None:
        await kit.store.commit(new_exe("kit-1"), [], processed_event_id="shared")
        await kit.store.commit(new_exe("kit-2"), [])
        assert await kit.store.is_processed("kit-1", "shared") is True
        assert await kit.store.is_processed("kit-2", "shared") is False

    @SMOKE
    async def test_load_for_event(self, kit: Kit) -> None:
        exe = new_exe("kit-1", context={"n": 1})
        await kit.store.commit(exe, [], processed_event_id="seen")
        loaded, seen = await kit.store.load_for_event("kit-1", "seen")
        assert seen is True
        assert loaded is not None and (loaded.id, loaded.version, loaded.context) == (
            "kit-1",
            1,
            {"n": 1},
        )
        loaded.context["n"] = 99  # a fresh copy
        again, unseen = await kit.store.load_for_event("kit-1", "unseen")
        assert unseen is False
        assert again is not None and again.context == {"n": 1}
        assert await kit.store.load_for_event("nobody", "seen") == (None, False)

    async def test_load_for_event_ignores_marks_of_unknown_executions(self, kit: Kit) -> None:
        """A processed mark never makes an unknown id look known (or processed)."""
        await kit.store.commit(new_exe("kit-1"), [], processed_event_id="e-1")
        assert await kit.store.load_for_event("kit-2", "e-1") == (None, False)

    async def test_load_for_event_agrees_with_is_processed(self, kit: Kit) -> None:
        exe = await stored(kit.store, new_exe("kit-1"))
        for n in range(3):
            await kit.store.commit(exe, [], processed_event_id=f"e-{n}")
        for event_id in ("e-0", "e-1", "e-2", "e-3"):
            loaded, seen = await kit.store.load_for_event("kit-1", event_id)
            assert loaded is not None and loaded.version == 4
            assert seen is await kit.store.is_processed("kit-1", event_id)

    async def test_ids_holding_pattern_characters_match_exactly(self, kit: Kit) -> None:
        """``%``, ``_``, ``\\``, ``*``, ``?``, ``[``, ``{`` and ``:`` are plain characters:
        every mark matches its own (execution id, event id) pair and nothing else."""
        store = kit.store
        marks = set(zip(LOOKALIKE_IDS, LOOKALIKE_EVENTS, strict=True)) | set(JOINED)
        for execution_id in sorted({i for i, _ in marks}):
            exe = new_exe(execution_id, context={"id": execution_id})
            for mark_id, event_id in sorted(marks):
                if mark_id == execution_id:
                    await store.commit(exe, [], processed_event_id=event_id)
        ids = sorted({i for i, _ in marks} | {"y", "x:y:"})
        events = sorted({e for _, e in marks} | {"y:z:", "z"})
        for execution_id in ids:
            loaded = await store.load(execution_id)
            exists = any(i == execution_id for i, _ in marks)
            assert (loaded is not None) is exists, execution_id
            if loaded is not None:
                assert loaded.context == {"id": execution_id}
            for event_id in events:
                expected = (execution_id, event_id) in marks
                assert await store.is_processed(execution_id, event_id) is expected, (
                    f"is_processed({execution_id!r}, {event_id!r}) should be {expected}"
                )
                found, seen = await store.load_for_event(execution_id, event_id)
                assert seen is expected, (execution_id, event_id)
                assert (found is not None) is exists
