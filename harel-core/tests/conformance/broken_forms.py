"""Broken memory stores for the kit checks of issue 17 §6 (normal forms, listing cursors).

Each has one bug the new kit tests must catch; kept apart from :mod:`broken_stores` so the
whole-kit proof there is unchanged.  ``forms_harness_fixture(name)`` builds a harness.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest
from broken_stores import BrokenHarness, Bug, _everything
from harel.conformance.harness import StoreHarness
from harel.model import Execution, ExecutionPage
from harel.store.common.commit import PreparedCommit
from harel.store.common.listing import ListingQuery, page_from_probe
from harel.store.common.validate import check_event_ref, check_id
from harel.store.memory import DictStore, MemoryData


def nfc(text: str) -> str:
    """What a normalising driver or collation stores for ``text``."""
    return unicodedata.normalize("NFC", text)


def _nfc_tree(value: Any) -> Any:
    if isinstance(value, str):
        return nfc(value)
    if isinstance(value, dict):
        return {nfc(key): _nfc_tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_nfc_tree(item) for item in value]
    return value


class NormalisedIds(DictStore):
    """Keys its tables by the NFC form of the execution id (a normalising key encoding or
    an accent-insensitive collation): lookalike ids share one record."""

    def load(self, execution_id: str) -> Execution | None:
        return super().load(nfc(check_id(execution_id)))

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        execution_id, event_id = check_event_ref(execution_id, event_id)
        return super().load_for_event(nfc(execution_id), event_id)

    def _commit(self, prepared: PreparedCommit) -> None:
        super()._commit(prepared._replace(execution_id=nfc(prepared.execution_id)))


class NormalisedPayloads(DictStore):
    """Normalises the payload of every execution it writes (context and history keys and
    values) to NFC, as a driver that normalises text would."""

    def _commit(self, prepared: PreparedCommit) -> None:
        data = json.loads(prepared.document)
        data["context"] = _nfc_tree(data.get("context", {}))
        data["history"] = _nfc_tree(data.get("history", {}))
        document = json.dumps(data, ensure_ascii=False)
        super()._commit(prepared._replace(document=document))


class LostCursorRow(DictStore):
    """Resumes a listing by finding the cursor's row among the rows that match now: when
    that row was purged or left the filter, the page is empty and the listing ends."""

    def _page(self, query: ListingQuery) -> ExecutionPage:
        if query.after is None or query.matches_nothing:
            return super()._page(query)
        rows = _everything(self, query)
        ids = [row.id for row in rows]
        if query.after not in ids:
            return ExecutionPage()
        start = ids.index(query.after) + 1
        return page_from_probe(query, rows[start : start + query.limit + 1])


FORM_BUGS: dict[str, Bug] = {
    "normalised_ids": Bug(NormalisedIds),
    "normalised_payloads": Bug(NormalisedPayloads),
    "lost_cursor_row": Bug(LostCursorRow),
}


class FormsHarness(BrokenHarness):
    """Memory stores with one bug of :data:`FORM_BUGS` (one shared dataset)."""

    def __init__(self, bug: str) -> None:
        self.bug = FORM_BUGS[bug]
        self.data = MemoryData()


def forms_harness_fixture(name: str) -> Any:
    """A ``harel_harness`` fixture over the named bug (``correct``: the memory store)."""

    @pytest.fixture
    def harel_harness() -> Iterator[StoreHarness]:
        harness = BrokenHarness.named(name) if name == "correct" else FormsHarness(name)
        yield harness
        harness.destroy()

    return harel_harness


__all__ = ["FORM_BUGS", "FormsHarness", "forms_harness_fixture"]
