"""The runner settles a commit whose outcome came back unknown by re-sending the same commit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from harel import (
    AsyncDictStore,
    AsyncDurableRunner,
    DictStore,
    DurableRunner,
    Event,
    definition_from_dsl,
)
from harel.engine.plan import COMMIT_RESENDS
from harel.store.errors import CommitOutcomeUnknown

FLOW = definition_from_dsl(
    "event Go {} machine flow { initial A  state A {}  final Done ok {}  from A to Done on Go }",
    "flow",
)


class LosingStore(DictStore):
    """Loses the answer of the next ``lose`` commits: ``stored`` ones are written first."""

    def __init__(self) -> None:
        super().__init__()
        self.lose: list[bool] = []  # per commit to lose: whether it is stored first
        self.sent: list[int] = []

    def commit(self, exe: Any, emits: Any, *args: Any, **kwargs: Any) -> None:
        self.sent.append(exe.version)
        if not self.lose:
            return super().commit(exe, emits, *args, **kwargs)
        stored = self.lose.pop(0)
        if stored:
            super().commit(exe, emits, *args, **kwargs)
            exe.version -= 1  # as the envelope restores it on an error
        raise CommitOutcomeUnknown(exe.id, exe.version, "reply lost (test)")


@pytest.mark.parametrize("stored", [True, False], ids=["landed", "never-arrived"])
def test_runner_resends_a_commit_whose_outcome_is_unknown(stored: bool) -> None:
    store = LosingStore()
    runner = DurableRunner(store, {FLOW.id: FLOW})
    exe = runner.create(FLOW.id, execution_id="x")
    store.lose = [stored]
    done = runner.process("x", Event(id="go-1", kind="Go"))
    assert done.active_path == "Done" and done.version == exe.version + 1
    assert store.sent[-2:] == [exe.version, exe.version], "the same commit was sent again"
    assert store.is_processed("x", "go-1")


def test_runner_gives_up_after_the_resends_and_says_unknown() -> None:
    store = LosingStore()
    runner = DurableRunner(store, {FLOW.id: FLOW})
    runner.create(FLOW.id, execution_id="x")
    store.lose = [False] * (COMMIT_RESENDS + 1)
    with pytest.raises(CommitOutcomeUnknown):
        runner.process("x", Event(id="go-1", kind="Go"))
    assert store.load("x").active_path == "A"  # type: ignore[union-attr]
    assert runner.process("x", Event(id="go-1", kind="Go")).active_path == "Done"


class AsyncLosingStore(AsyncDictStore):
    """The async twin of :class:`LosingStore`."""

    def __init__(self) -> None:
        super().__init__()
        self.lose: list[bool] = []

    async def commit(self, exe: Any, emits: Any, *args: Any, **kwargs: Any) -> None:
        if not self.lose:
            return await super().commit(exe, emits, *args, **kwargs)
        if self.lose.pop(0):
            await super().commit(exe, emits, *args, **kwargs)
            exe.version -= 1
        raise CommitOutcomeUnknown(exe.id, exe.version, "reply lost (test)")


def test_async_runner_resends_too() -> None:
    async def main() -> None:
        store = AsyncLosingStore()
        runner = AsyncDurableRunner(store, {FLOW.id: FLOW})
        await runner.create(FLOW.id, execution_id="x")
        store.lose = [True]
        done = await runner.process("x", Event(id="go-1", kind="Go"))
        assert done.active_path == "Done" and done.version == 2
        assert len(await store.pending_outbox()) == 0

    asyncio.run(main())
