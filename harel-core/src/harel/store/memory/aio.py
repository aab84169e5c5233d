"""``AsyncDictStore``: the asynchronous in-memory reference store, a :class:`DictStore` seen
through the async contract.

Every call is the sync store's method run at once in the caller's thread: memory work never
waits, so a call never suspends, and a cancellation lands either before it started or after
it finished (``exe.version`` always tells whether a cancelled commit was stored).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Self, TypeVar

from harel.store.common.threaded import SyncHops
from harel.store.contract import DEFAULT_TRACE_MAX, Capabilities
from harel.store.memory._spec import CAPABILITIES, SPEC
from harel.store.memory._tables import MemoryData
from harel.store.memory.sync import DictStore

T = TypeVar("T")


class _AtOnce:
    """Runs a call whole, without suspending (what :class:`SyncHops` hands every call to)."""

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, synchronously."""
        return fn(*args, **kwargs)


class AsyncDictStore(SyncHops[DictStore]):
    """In-memory :class:`~harel.store.contract.AsyncExecutionStore` over a :class:`DictStore`
    (``store``) of the same data; cancellation-safe because no call suspends."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(
        self, data: MemoryData | None = None, *, trace_max: int | None = DEFAULT_TRACE_MAX
    ) -> None:
        self.store = DictStore(data, trace_max=trace_max)
        self._runner = _AtOnce()

    @classmethod
    def over(cls, store: DictStore) -> Self:
        """The async contract over ``store`` (a :class:`DictStore` or a subclass)."""
        wrapper = cls.__new__(cls)
        wrapper.store, wrapper._runner = store, _AtOnce()
        return wrapper

    @classmethod
    async def from_url(cls, url: str = "memory://", **knobs: Any) -> Self:
        """``memory://`` is a fresh store; ``memory://NAME`` shares NAME's data in this process."""
        return cls(**SPEC.open_args(url, knobs).arguments)

    @property
    def data(self) -> MemoryData:
        """The dataset (the wrapped store's)."""
        return self.store.data

    def __repr__(self) -> str:
        return f"{type(self).__name__}(executions={len(self.data.executions)})"

    def reopen(self) -> Self:
        """A second store over the same data (what a restart looks like in memory)."""
        return type(self)(self.data, trace_max=self.trace_max)

    async def close(self) -> None:
        """Nothing to release."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
