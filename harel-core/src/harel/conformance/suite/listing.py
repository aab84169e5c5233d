"""Listing: filters, paging, cursors and the summary projection."""

from __future__ import annotations

from typing import Any

import pytest

from harel.conformance.suite._base import SMOKE, Kit, KitBase, drain_listing, new_exe, stored
from harel.model import ExecutionSummary, Status
from harel.store.contract import AsyncExecutionStore
from harel.store.errors import InvalidCursor

STATUSES = (Status.PENDING, Status.RUNNING, Status.DONE, Status.FAILED)
PAGINATE_ALL = 120
ABOVE_DEFAULT = 130
"""More executions than ``list_executions``' default ``limit`` (100)."""
LOOKALIKE_DEFINITIONS = (
    "order",
    "order-v2",
    "orders",
    "Order",
    "ORDER",
    "orde_",
    "ord%",
    "%",
    "_",
    "*",
    "?",
    "[",
    "[o]rder",
    "o*",
    "order?",
    "ord.*",
    "order\\",
)
"""Definition ids that a prefix, LIKE, GLOB, regex or case-insensitive match would confuse."""


def _seed_rows() -> list[dict[str, Any]]:
    """12 executions: two definitions, four statuses, two children (of ``lst-00``)."""
    rows = []
    for n in range(12):
        rows.append(
            {
                "id": f"lst-{n:02d}",
                "definition_id": "flow.a" if n % 2 == 0 else "flow.b",
                "status": STATUSES[n % 4],
                "parent_id": "lst-00" if n in (5, 10) else None,
                "outcome": f"out-{n}" if STATUSES[n % 4] is Status.DONE else None,
                "active_path": f"/s{n}",
            }
        )
    return rows


async def _seed(store: AsyncExecutionStore) -> list[dict[str, Any]]:
    rows = _seed_rows()
    # insert in a scrambled order so an "insertion order" listing is not accidentally sorted
    for row in sorted(rows, key=lambda r: (r["id"][-1], r["id"])):
        exe = new_exe(
            row["id"],
            row["definition_id"],
            status=Status.PENDING,
            parent_id=row["parent_id"],
            context={"secret": "context is not part of a summary"},
            history={"/": "/x"},
        )
        await store.save(exe)
        exe.status = row["status"]
        exe.outcome = row["outcome"]
        exe.active_path = row["active_path"]
        await store.save(exe)  # version 2: listing must see the latest commit
    return rows


FILTERS: dict[str, dict[str, Any]] = {
    "everything": {},
    "definition": {"definition_id": "flow.a"},
    "one_status": {"status": [Status.RUNNING]},
    "two_statuses": {"status": [Status.DONE, Status.FAILED]},
    "roots_only": {"roots_only": True},
    "status_and_roots": {"status": [Status.RUNNING, Status.PENDING], "roots_only": True},
    "combined": {"definition_id": "flow.b", "status": [Status.RUNNING], "roots_only": True},
    "no_match": {"definition_id": "flow.none"},
}


def _expected(rows: list[dict[str, Any]], filters: dict[str, Any]) -> set[str]:
    out = set()
    for row in rows:
        if "definition_id" in filters and row["definition_id"] != filters["definition_id"]:
            continue
        if "status" in filters and row["status"] not in filters["status"]:
            continue
        if filters.get("roots_only") and row["parent_id"] is not None:
            continue
        out.add(row["id"])
    return out


class ListingTests(KitBase):
    """``list_executions`` semantics."""

    @pytest.mark.parametrize("name", list(FILTERS))
    async def test_filters_reassembled_from_pages(self, kit: Kit, name: str) -> None:
        rows = await _seed(kit.store)
        filters = FILTERS[name]
        pages = await drain_listing(kit.store, limit=4, **filters)
        ids = [item for page in pages for item in page]
        assert len(ids) == len(set(ids)), f"an id appeared twice: {pages}"
        assert set(ids) == _expected(rows, filters)

    async def test_summary_projection(self, kit: Kit) -> None:
        rows = {row["id"]: row for row in await _seed(kit.store)}
        page = await kit.store.list_executions(limit=100)
        assert len(page.items) == 12 and page.next_cursor is None
        for item in page.items:
            assert isinstance(item, ExecutionSummary)
            row = rows[item.id]
            assert (
                item.definition_id,
                item.status,
                item.outcome,
                item.active_path,
                item.version,
                item.parent_id,
            ) == (
                row["definition_id"],
                row["status"],
                row["outcome"],
                row["active_path"],
                2,
                row["parent_id"],
            )
            assert not hasattr(item, "context")
            assert not hasattr(item, "history")

    async def test_listing_follows_status_changes(self, kit: Kit) -> None:
        exe = new_exe("lst-1", status=Status.RUNNING)
        await kit.store.save(exe)
        exe.status = Status.DONE
        exe.outcome = "finished"
        await kit.store.save(exe)
        running = await kit.store.list_executions(status=[Status.RUNNING])
        done = await kit.store.list_executions(status=[Status.DONE])
        assert running.items == []
        assert [(i.id, i.version, i.outcome) for i in done.items] == [("lst-1", 2, "finished")]

    async def test_ordered_by_id(self, kit: Kit) -> None:
        kit.require("ordered_listing")
        await _seed(kit.store)
        pages = await drain_listing(kit.store, limit=5)
        flat = [item for page in pages for item in page]
        assert flat == sorted(flat)
        first = await kit.store.list_executions(limit=2)
        assert [i.id for i in first.items] == ["lst-00", "lst-01"]
        roots = await drain_listing(kit.store, limit=3, roots_only=True)
        flat_roots = [item for page in roots for item in page]
        assert flat_roots == sorted(flat_roots)

    async def test_exact_pages(self, kit: Kit) -> None:
        kit.require("exact_pages")
        await _seed(kit.store)
        assert [len(p) for p in await drain_listing(kit.store, limit=4)] == [4, 4, 4]
        assert [len(p) for p in await drain_listing(kit.store, limit=5)] == [5, 5, 2]
        assert [len(p) for p in await drain_listing(kit.store, limit=12)] == [12]
        assert [len(p) for p in await drain_listing(kit.store, limit=4, roots_only=True)] == [
            4,
            4,
            2,
        ]

    @SMOKE
    async def test_no_cursor_after_last_page(self, kit: Kit) -> None:
        """Not even when the last page is exactly full."""
        await _seed(kit.store)
        page = await kit.store.list_executions(limit=12)
        assert len(page.items) == 12 and page.next_cursor is None
        page = await kit.store.list_executions(limit=13)
        assert len(page.items) == 12 and page.next_cursor is None
        pages = await drain_listing(kit.store, limit=6)
        assert sum(len(p) for p in pages) == 12

    async def test_limit_one_pagination_terminates(self, kit: Kit) -> None:
        for n in range(PAGINATE_ALL):
            await kit.store.save(new_exe(f"pg-{n:04d}", "flow.page"))
        pages = await drain_listing(kit.store, limit=1, max_pages=PAGINATE_ALL + 1)
        ids = [item for page in pages for item in page]
        assert sorted(ids) == [f"pg-{n:04d}" for n in range(PAGINATE_ALL)]
        assert len(ids) == len(set(ids))

    @pytest.mark.parametrize("cursor", ["garbage!!", "", "bm90LWEtY3Vyc29y", "{}", "0"])
    async def test_bad_cursor(self, kit: Kit, cursor: str) -> None:
        await _seed(kit.store)
        with pytest.raises(InvalidCursor) as info:
            await kit.store.list_executions(cursor=cursor)
        assert isinstance(info.value, ValueError)

    @pytest.mark.parametrize("limit", [0, -1])
    async def test_bad_limit(self, kit: Kit, limit: int) -> None:
        await _seed(kit.store)
        with pytest.raises(ValueError):
            await kit.store.list_executions(limit=limit)

    async def test_empty_status_list_matches_nothing(self, kit: Kit) -> None:
        await _seed(kit.store)
        page = await kit.store.list_executions(status=[])
        assert page.items == [] and page.next_cursor is None

    async def test_empty_store_lists_nothing(self, kit: Kit) -> None:
        page = await kit.store.list_executions(limit=1)
        assert page.items == [] and page.next_cursor is None

    async def test_cursor_survives_reopen(self, kit: Kit) -> None:
        """A cursor from one store object continues the listing on another."""
        await _seed(kit.store)
        first = await kit.store.list_executions(limit=5)
        assert first.next_cursor is not None
        other = await kit.open()
        rest = await drain_listing(other, limit=5)
        assert rest  # a full listing through the other store works too
        second = await other.list_executions(limit=5, cursor=first.next_cursor)
        seen = [i.id for i in first.items] + [i.id for i in second.items]
        assert len(set(seen)) == len(seen) == 10

    @pytest.mark.parametrize("filters", [{}, {"status": [Status.DONE]}], ids=["all", "done"])
    async def test_pages_stay_consistent_while_rows_come_and_go(
        self, kit: Kit, filters: dict[str, Any]
    ) -> None:
        """Executions created and purged between pages: no summary is listed twice, and none
        that existed throughout is skipped (a keyset cursor, not an offset)."""
        store = kit.store
        seeded = [f"row-{n:03d}" for n in range(0, 60, 2)]
        for execution_id in seeded:
            await stored(store, new_exe(execution_id, status=Status.DONE))
        seen: list[str] = []
        purged: set[str] = set()
        cursor: str | None = None
        for round_no in range(100):
            page = await store.list_executions(limit=4, cursor=cursor, **filters)
            seen.extend(item.id for item in page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
            last = seen[-1]
            if round_no % 2 == 0:  # new rows before and after the cursor
                for new_id in (f"{seen[0]}-new{round_no}", f"{last}-new{round_no}"):
                    await stored(store, new_exe(new_id, status=Status.DONE))
            else:  # one row already listed and one not yet listed purged
                behind = [i for i in seen if i not in purged]
                ahead = [i for i in seeded if i > last and i not in purged]
                for victim in (behind[len(behind) // 2], *ahead[-1:]):
                    assert await store.purge(victim, force=True) is True
                    purged.add(victim)
        else:
            pytest.fail("the listing did not end")
        assert len(seen) == len(set(seen)), (
            f"listed twice: {sorted({i for i in seen if seen.count(i) > 1})}"
        )
        throughout = set(seeded) - purged
        skipped = sorted(throughout - set(seen))
        assert not skipped, f"skipped executions that existed throughout: {skipped}"

    @pytest.mark.parametrize(
        ("removal", "filters"),
        [
            ("purged", {}),
            ("purged", {"status": [Status.DONE]}),
            ("left_filter", {"status": [Status.DONE]}),
            ("left_filter", {"status": [Status.DONE, Status.FAILED], "roots_only": True}),
        ],
        ids=["purged-all", "purged-done", "left-done", "left-done-or-failed-roots"],
    )
    async def test_next_page_after_the_cursor_row_is_removed(
        self, kit: Kit, removal: str, filters: dict[str, Any]
    ) -> None:
        """The execution a cursor points after is purged, or leaves the status filter,
        between two calls: the next page starts at the next id (not empty, nothing skipped)."""
        store = kit.store
        rows = {f"cur-{n:02d}": Status.DONE if n % 3 else Status.RUNNING for n in range(18)}
        for execution_id, status in rows.items():
            await stored(store, new_exe(execution_id, status=status))
        first = await store.list_executions(limit=3, **filters)
        assert first.next_cursor is not None and first.items
        listed = [item.id for item in first.items]
        victim = listed[-1]
        if removal == "purged":
            assert await store.purge(victim, force=True) is True
        else:
            exe = await store.load(victim)
            assert exe is not None
            exe.status = Status.RUNNING
            await store.save(exe)
        wanted = {
            i for i, status in rows.items() if "status" not in filters or status is Status.DONE
        }
        ahead = sorted(wanted - set(listed))
        page = await store.list_executions(limit=3, cursor=first.next_cursor, **filters)
        following = [item.id for item in page.items]
        assert following, f"an empty page after {victim} was {removal} (cursor kept: {page})"
        if kit.capabilities.ordered_listing:
            assert following[0] == min(i for i in ahead if i > victim), (
                f"after {victim} was {removal} the next page started at {following[0]}"
            )
        if kit.capabilities.exact_pages:
            assert len(following) == min(3, len(ahead)), following
        cursor = page.next_cursor
        listed.extend(following)
        for _ in range(len(rows)):
            if cursor is None:
                break
            page = await store.list_executions(limit=3, cursor=cursor, **filters)
            assert page.items, "an empty page followed a non-null cursor"
            listed.extend(item.id for item in page.items)
            cursor = page.next_cursor
        else:
            pytest.fail("the listing did not end")
        assert len(listed) == len(set(listed)), f"listed twice: {listed}"
        assert not set(ahead) - set(listed), f"skipped: {sorted(set(ahead) - set(listed))}"

    async def test_definition_filter_is_exact(self, kit: Kit) -> None:
        """Definition ids that are prefixes, patterns or case variants of each other never
        match each other."""
        owners: dict[str, list[str]] = {}
        for n, definition_id in enumerate(LOOKALIKE_DEFINITIONS):
            ids = [f"def-{n:02d}-a", f"def-{n:02d}-b"] if definition_id == "order" else []
            ids = ids or [f"def-{n:02d}"]
            for execution_id in ids:
                await stored(kit.store, new_exe(execution_id, definition_id))
            owners[definition_id] = ids
        for definition_id, ids in owners.items():
            pages = await drain_listing(kit.store, limit=3, definition_id=definition_id)
            listed = sorted(i for page in pages for i in page)
            assert listed == sorted(ids), f"definition_id={definition_id!r} listed {listed}"
        for absent in ("ord", "orde", "order-", "%%", "o"):
            page = await kit.store.list_executions(definition_id=absent)
            assert page.items == [], f"definition_id={absent!r} matched {page.items}"

    async def test_limit_above_the_default_is_honoured(self, kit: Kit) -> None:
        """No silent page cap: ``limit`` above the default returns that many."""
        for n in range(ABOVE_DEFAULT):
            await stored(kit.store, new_exe(f"big-{n:04d}"))
        default = await kit.store.list_executions()
        assert default.next_cursor is not None
        everything = await kit.store.list_executions(limit=ABOVE_DEFAULT)
        larger = await kit.store.list_executions(limit=10 * ABOVE_DEFAULT)
        assert larger.next_cursor is None
        assert sorted(i.id for i in larger.items) == [f"big-{n:04d}" for n in range(ABOVE_DEFAULT)]
        if kit.capabilities.exact_pages:
            assert len(default.items) == 100
            assert len(everything.items) == ABOVE_DEFAULT and everything.next_cursor is None
            page = await kit.store.list_executions(limit=ABOVE_DEFAULT - 1)
            assert len(page.items) == ABOVE_DEFAULT - 1 and page.next_cursor is not None
