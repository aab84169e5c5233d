"""Contract basics: declared capabilities, an empty dataset, CAS, copies and round trips."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from harel.conformance.harness import StoreHarness
from harel.conformance.suite._base import (
    FAR_FUTURE,
    SMOKE,
    Kit,
    KitBase,
    declared_capabilities,
    event,
    new_exe,
    stored,
)
from harel.conformance.suite._processes import plugin_problems, registered_backend
from harel.model import ChildState, Event, Status
from harel.store.contract import Capabilities, StoreConflict
from harel.store.errors import StoreError


class ContractTests(KitBase):
    """Declarations, emptiness, compare-and-set and copy semantics."""

    @SMOKE
    def test_capabilities_declared(self, harel_harness: StoreHarness) -> None:
        """The harness class sets ``capabilities`` itself, with every flag explicit."""
        caps = declared_capabilities(type(harel_harness))
        assert caps is not None, (
            f"{type(harel_harness).__name__} must declare `capabilities: ClassVar[Capabilities] "
            "= Capabilities(persistent=..., multi_process=..., ordered_listing=..., "
            "exact_pages=...)`; the kit does not guess"
        )
        assert isinstance(caps, Capabilities)

    @SMOKE
    def test_plugin_imports_no_store_module_and_no_engine(
        self, harel_harness: StoreHarness, harel_strict: bool
    ) -> None:
        """Importing the backend's entry-point module (and running its hook), as listing the
        backends does, loads neither its store modules (so no driver) nor the engine."""
        found = registered_backend(harel_harness)
        if found is None:
            message = (
                f"the store class {type(harel_harness).__name__} opens is not registered by an "
                "installed `harel.stores` entry point, so its plugin cannot be checked"
            )
            if harel_strict:
                pytest.fail(f"--harel-strict: {message}", pytrace=False)
            pytest.skip(message)
        problems = plugin_problems(*found)
        assert not problems, "; ".join(problems)

    async def test_store_classes_declare_capabilities(self, kit: Kit) -> None:
        """Every store class carries a ``capabilities`` attribute (the registry lists it)."""
        raw = getattr(kit.store, "sync", kit.store)
        assert isinstance(getattr(type(raw), "capabilities", None), Capabilities), (
            f"{type(raw).__name__} needs a `capabilities` class attribute"
        )

    @SMOKE
    async def test_fresh_dataset_is_empty(self, kit: Kit) -> None:
        """A fresh harness holds no executions, outbox, spawns, timers or trace."""
        store = kit.store
        page = await store.list_executions()
        assert page.items == []
        assert page.next_cursor is None
        assert await store.pending_outbox() == []
        assert await store.pending_spawns() == []
        assert await store.due_timers(FAR_FUTURE) == []
        assert await store.load("kit-1") is None
        assert await store.read_trace("kit-1") == []
        assert await store.is_processed("kit-1", "event-1") is False

    async def test_first_save_inserts_version_1(self, kit: Kit) -> None:
        exe = new_exe("kit-1", context={"n": 1})
        await kit.store.save(exe)
        assert exe.version == 1
        loaded = await kit.store.load("kit-1")
        assert loaded is not None
        assert loaded.version == 1
        assert loaded.context == {"n": 1}

    async def test_sequential_saves_bump_version(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        for expected in (1, 2, 3):
            exe.context["n"] = expected
            await kit.store.save(exe)
            assert exe.version == expected
        loaded = await kit.store.load("kit-1")
        assert loaded is not None
        assert (loaded.version, loaded.context) == (3, {"n": 3})

    @SMOKE
    async def test_stale_save_conflicts(self, kit: Kit) -> None:
        """Two copies at version 1: the first save wins, the second conflicts and rolls back."""
        await stored(kit.store, new_exe("kit-1"))
        first = await kit.store.load("kit-1")
        second = await kit.store.load("kit-1")
        assert first is not None and second is not None
        first.context["who"] = "first"
        await kit.store.save(first)
        assert first.version == 2
        second.context["who"] = "second"
        with pytest.raises(StoreConflict) as info:
            await kit.store.save(second)
        assert (info.value.execution_id, info.value.expected, info.value.found) == ("kit-1", 1, 2)
        assert isinstance(info.value, StoreError)
        assert second.version == 1
        loaded = await kit.store.load("kit-1")
        assert loaded is not None
        assert (loaded.version, loaded.context) == (2, {"who": "first"})

    async def test_absent_record_with_version_conflicts(self, kit: Kit) -> None:
        """A never-stored id with ``version > 0`` conflicts with ``found=None``."""
        exe = new_exe("kit-ghost", version=3)
        with pytest.raises(StoreConflict) as info:
            await kit.store.save(exe)
        assert (info.value.expected, info.value.found) == (3, None)
        assert exe.version == 3
        assert await kit.store.load("kit-ghost") is None

    async def test_insert_over_existing_conflicts(self, kit: Kit) -> None:
        """A second version-0 insert of a stored id conflicts with the stored version."""
        await stored(kit.store, new_exe("kit-1", context={"v": "original"}))
        again = new_exe("kit-1", context={"v": "impostor"})
        with pytest.raises(StoreConflict) as info:
            await kit.store.save(again)
        assert (info.value.expected, info.value.found) == (0, 1)
        assert again.version == 0
        loaded = await kit.store.load("kit-1")
        assert loaded is not None and loaded.context == {"v": "original"}

    async def test_future_version_conflicts(self, kit: Kit) -> None:
        """Holding a version ahead of the stored one is a conflict too."""
        exe = await stored(kit.store, new_exe("kit-1"))
        exe.version = 5
        with pytest.raises(StoreConflict) as info:
            await kit.store.save(exe)
        assert (info.value.expected, info.value.found) == (5, 1)
        assert exe.version == 5

    async def test_load_unknown_is_none(self, kit: Kit) -> None:
        assert await kit.store.load("nobody") is None

    async def test_load_returns_a_fresh_copy(self, kit: Kit) -> None:
        """Mutating a loaded execution (or the committed object) never changes the store."""
        exe = new_exe("kit-1", context={"nested": {"list": [1, 2]}}, history={"/a": "/a/b"})
        await kit.store.save(exe)
        exe.context["nested"]["list"].append("after-commit")
        loaded = await kit.store.load("kit-1")
        assert loaded is not None
        assert loaded is not exe
        loaded.context["nested"]["list"].append(3)
        loaded.history["/x"] = "/y"
        loaded.status = Status.DONE
        again = await kit.store.load("kit-1")
        assert again is not None and again is not loaded
        assert again.context == {"nested": {"list": [1, 2]}}
        assert again.history == {"/a": "/a/b"}
        assert again.status is Status.PENDING

    async def test_every_field_round_trips(self, kit: Kit) -> None:
        """All Execution fields, nested models and datetimes survive a round trip."""
        when = datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=UTC)
        exe = new_exe(
            "kit-full",
            definition_id="kit.full",
            definition_fqn="pkg.module:Flow",
            root_path="/main/region",
            status=Status.SUSPENDED,
            outcome="paused",
            error=None,
            active_path="/main/region/wait",
            history={"/main": "/main/region"},
            context={"n": 1, "f": 0.1, "s": "é\u2603", "none": None, "list": [True, {"k": []}]},
            processed_events=7,
            priority=4,
            parent_id="kit-parent",
            child_id="child-a",
            deferred=[Event(id="d1", kind="Later", created_time=when, data={"x": [1]})],
            children={"r": ChildState(root_path="/r", finished=True, outcome="ok", key="k")},
            invoke_seq={"/main": 3},
        )
        await kit.store.save(exe)
        loaded = await kit.store.load("kit-full")
        assert loaded == exe
        assert loaded is not None and loaded.deferred[0].created_time == when

    async def test_event_round_trips_in_outbox(self, kit: Kit) -> None:
        """Events come back from the outbox equal to what was emitted (datetimes included)."""
        when = datetime(2023, 1, 1, 12, 0, tzinfo=UTC)
        sent = Event(id="e-1", kind="Go", created_time=when, received_time=when, data={"a": [1]})
        await kit.store.commit(new_exe("kit-1"), [("target-1", sent), (None, event("e-2"))])
        entries = await kit.store.pending_outbox()
        assert [(entry.target_id, entry.event) for entry in entries] == [
            ("target-1", sent),
            (None, event("e-2")),
        ]
