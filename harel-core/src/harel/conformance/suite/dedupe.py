"""Dedupe: processed marks keyed by ``(execution_id, event_id)`` and ``load_for_event``."""

from __future__ import annotations

from harel.conformance.suite._base import Kit, KitBase, new_exe, stored


class DedupeTests(KitBase):
    """``is_processed`` and ``load_for_event``."""

    async def test_processed_marks(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [], processed_event_id="e-1")
        assert await kit.store.is_processed("kit-1", "e-1") is True
        assert await kit.store.is_processed("kit-1", "e-2") is False
        assert await kit.store.is_processed("kit-2", "e-1") is False
        # marking the same event again is idempotent
        await kit.store.commit(exe, [], processed_event_id="e-1")
        await kit.store.commit(exe, [], processed_event_id="e-2")
        assert await kit.store.is_processed("kit-1", "e-1") is True
        assert await kit.store.is_processed("kit-1", "e-2") is True

    async def test_marks_are_per_execution(self, kit: Kit) -> None:
        await kit.store.commit(new_exe("kit-1"), [], processed_event_id="shared")
        await kit.store.commit(new_exe("kit-2"), [])
        assert await kit.store.is_processed("kit-1", "shared") is True
        assert await kit.store.is_processed("kit-2", "shared") is False

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
