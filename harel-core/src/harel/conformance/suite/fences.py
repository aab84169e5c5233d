"""The commit's own dedupe and fence: an already-recorded event id is refused in the commit
(``AlreadyProcessed``, nothing written), and a copy this process stored itself cannot
overwrite an execution that was purged and re-created (or imported) up to the same version.

These are what let a runner keep its committed copy and send one request per event: the
commit alone decides, with no read before it.
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
    snapshot,
    step,
    stored,
)
from harel.model import Status
from harel.store.contract import TimerOp
from harel.store.errors import AlreadyProcessed, StoreConflict

EMITS = [("kit-2", event("out-1")), (None, event("out-2"))]
SIDE_WRITES: dict[str, Any] = {
    "timers": (TimerOp.schedule("/late", 7.0),),
    "spawns": [("kit-child", "/region", {"seed": 1})],
    "trace": step("Again", to_path="/b"),
}


class FenceTests(KitBase):
    """``AlreadyProcessed`` and the stored-copy fence."""

    @SMOKE
    async def test_recorded_event_id_is_refused_with_nothing_written(self, kit: Kit) -> None:
        exe = new_exe("kit-1", context={"n": 1})
        await kit.store.commit(exe, [], processed_event_id="e-1")
        before = await snapshot(kit.store, ["kit-1", "kit-2", "kit-child"], ["e-1"])
        exe.context["n"] = 2
        with pytest.raises(AlreadyProcessed) as caught:
            await kit.store.commit(exe, EMITS, processed_event_id="e-1", **SIDE_WRITES)
        assert isinstance(caught.value, StoreConflict)  # a conflict: callers that reload work
        assert (caught.value.execution_id, caught.value.event_id) == ("kit-1", "e-1")
        assert exe.version == 1
        assert await snapshot(kit.store, ["kit-1", "kit-2", "kit-child"], ["e-1"]) == before
        loaded = await kit.store.load("kit-1")
        assert loaded is not None and (loaded.version, loaded.context) == (1, {"n": 1})

    async def test_recorded_event_id_is_refused_from_a_stale_copy(self, kit: Kit) -> None:
        """A redelivery on an out-of-date copy says "already processed", not just "conflict":
        the runner drops it without reloading and re-driving."""
        first = await stored(kit.store, new_exe("kit-1"))
        rival = await kit.store.load("kit-1")
        assert rival is not None
        await kit.store.commit(rival, [], processed_event_id="e-1")
        with pytest.raises(AlreadyProcessed) as caught:
            await kit.store.commit(first, EMITS, processed_event_id="e-1", **SIDE_WRITES)
        assert caught.value.found == 2 and first.version == 1
        assert await kit.store.pending_outbox() == []
        assert await kit.store.due_timers(FAR_FUTURE) == []

    async def test_a_fresh_event_id_still_commits(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [], processed_event_id="e-1")
        await kit.store.commit(exe, [], processed_event_id="e-2")
        await kit.store.commit(exe, [])  # no event id: no dedupe check
        assert exe.version == 3
        assert await kit.store.is_processed("kit-1", "e-2") is True

    async def test_marks_of_another_execution_do_not_refuse(self, kit: Kit) -> None:
        await kit.store.commit(new_exe("kit-1"), [], processed_event_id="shared")
        other = new_exe("kit-2")
        await kit.store.commit(other, [], processed_event_id="shared")
        assert other.version == 1

    async def test_pruned_mark_no_longer_refuses(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [], processed_event_id="e-1")
        assert await kit.store.prune_processed(FAR_FUTURE) == 1
        await kit.store.commit(exe, [], processed_event_id="e-1")
        assert exe.version == 2

    @SMOKE
    async def test_stored_copy_cannot_overwrite_a_recreated_execution(self, kit: Kit) -> None:
        """Purge, re-create with the same id, reach the same version: the old copy's commit
        is refused (its version matches, the commit that wrote that version does not)."""
        old = new_exe("kit-1", context={"who": "old"})
        await kit.store.commit(old, [])
        old.status = Status.DONE
        await kit.store.commit(old, [])
        assert await kit.store.purge("kit-1") is True
        new = new_exe("kit-1", context={"who": "new"})
        await kit.store.commit(new, [])
        await kit.store.commit(new, [])
        assert (old.version, new.version) == (2, 2)
        old.context["who"] = "stale"
        with pytest.raises(StoreConflict) as caught:
            await kit.store.commit(old, [], processed_event_id="e-9")
        assert not isinstance(caught.value, AlreadyProcessed)
        assert caught.value.found == 2 and old.version == 2
        loaded = await kit.store.load("kit-1")
        assert loaded is not None and loaded.context == {"who": "new"}
        assert await kit.store.is_processed("kit-1", "e-9") is False
        await kit.store.commit(new, [])  # the live copy goes on
        assert new.version == 3

    async def test_stored_copy_cannot_overwrite_an_imported_execution(self, kit: Kit) -> None:
        """An import writes no commit's receipt: a copy stored before the purge is refused."""
        exe = new_exe("kit-1", status=Status.DONE, context={"n": 1})
        await kit.store.commit(exe, [])
        record = await kit.store.export_execution("kit-1")
        assert record is not None
        await kit.store.purge("kit-1")
        await kit.store.import_execution(record)
        exe.context["n"] = 2
        with pytest.raises(StoreConflict):
            await kit.store.commit(exe, [])
        loaded = await kit.store.load("kit-1")
        assert loaded is not None and loaded.context == {"n": 1}

    async def test_loaded_copy_commits_on_its_version(self, kit: Kit) -> None:
        """A copy from ``load`` carries no fence: its version alone decides (as always)."""
        await stored(kit.store, new_exe("kit-1"))
        loaded = await kit.store.load("kit-1")
        assert loaded is not None
        await kit.store.commit(loaded, [], processed_event_id="e-1")
        await kit.store.commit(loaded, [], processed_event_id="e-2")  # now fenced: still its own
        assert loaded.version == 3

    async def test_resent_commit_with_its_mark_still_succeeds(self, kit: Kit) -> None:
        """The re-send rule comes first: a stored commit sent again (its reply was lost)
        answers success, although its own dedupe mark is now recorded."""
        exe = await stored(kit.store, new_exe("kit-1"))
        await kit.store.commit(exe, EMITS, processed_event_id="e-1", **SIDE_WRITES)
        assert exe.version == 2
        exe.version = 1  # what the envelope restores when the reply is lost
        await kit.store.commit(exe, EMITS, processed_event_id="e-1", **SIDE_WRITES)
        assert exe.version == 2
        assert len(await kit.store.pending_outbox()) == 2  # written once
