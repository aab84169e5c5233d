"""What the tutorial store hands the conformance kit: one fresh, empty :class:`Tables` per test.

Every ``open_sync()`` / ``open_async()`` is a new store object over the harness's tables (how
the kit writes restarts and two writers); ``footprint`` reads the dicts themselves, not the
contract.  ``harness_from_url`` is the registry's hook for ``harel conformance tutorial://``.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from harel.conformance.harness import StoreHarness
from harel.store.contract import Capabilities

from harel_tutorial_store import SPEC
from harel_tutorial_store.store import AsyncTutorialStore, Tables, TutorialStore


class TutorialHarness(StoreHarness):
    """One private dataset; ``url()`` is ``None``: no other process can reach it."""

    capabilities: ClassVar[Capabilities] = SPEC.capabilities

    def __init__(self) -> None:
        self.tables = Tables()

    def open_sync(self) -> TutorialStore:
        """A new sync store over the harness's tables."""
        return TutorialStore(self.tables)

    async def open_async(self) -> AsyncTutorialStore:
        """A new async store over the harness's tables."""
        return await AsyncTutorialStore.open(self.tables)

    def footprint(self, execution_id: str) -> list[str]:
        """Every record the tables hold under exactly ``execution_id``, one label each."""
        tables = self.tables
        with tables.lock:
            labels = ["execution"] if execution_id in tables.executions else []
            labels += [f"processed:{ev}" for eid, ev in tables.marks if eid == execution_id]
            labels += [f"timer:{path}" for eid, path in tables.timers if eid == execution_id]
            labels += [f"outbox:{s}" for s, row in tables.outbox.items() if row[0] == execution_id]
            labels += [f"spawn:{s}" for s, row in tables.spawns.items() if row[0] == execution_id]
            if execution_id in tables.trace:
                labels += ["trace-ring", *(f"trace:{i}" for i in tables.trace[execution_id])]
            if execution_id in tables.work:
                labels.append("work")
        return labels

    def destroy(self) -> None:
        """Forget the dataset: stores opened from now on start from an empty one."""
        self.tables = Tables()

    def describe(self) -> str:
        """``tutorial (in-process)``."""
        return "tutorial (in-process)"


def harness_from_url(url: str, workdir: Path) -> TutorialHarness:
    """A harness over a new private dataset (a ``tutorial://NAME`` dataset is never touched);
    ``workdir`` is not needed: nothing is written to disk."""
    SPEC.parse_url(url)  # refuses a URL of another scheme or with unknown knobs
    del workdir
    return TutorialHarness()
