"""``AsyncJsonDirStore``: the async twin — each operation runs whole in the store's worker thread.

The file system has no async driver, so there is no second implementation: the store is core's
sync-to-async adapter (:class:`~harel.store.author.ThreadedAsyncStore`) over a
:class:`JsonDirStore` that one worker thread owns.  Every contract coroutine hands the whole
sync operation (its plan, lock to unlock) to that thread — one thread hop per operation, the
event loop never blocks on the disk or the lock, and operations of one store run one at a
time in call order.

Cancellation: an operation that has not started when its caller is cancelled never runs; one
that has started runs to completion before ``CancelledError`` reaches the caller.  So a
cancelled ``commit`` has either stored nothing (``exe.version`` restored) or all of the step
(``exe.version`` bumped) by the time the caller sees the cancellation, and a retry after it
conflicts instead of writing the step twice.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, ClassVar, Self

from harel.store.author import AsyncFromUrl, ThreadedAsyncStore
from harel.store.contract import Capabilities

from harel_example_jsondir._spec import CAPABILITIES, SPEC
from harel_example_jsondir.sync import JsonDirStore


class AsyncJsonDirStore(AsyncFromUrl, ThreadedAsyncStore[JsonDirStore]):
    """An :class:`~harel.store.contract.AsyncExecutionStore` over a jsondir directory.

    Same data, guarantees and locking as :class:`JsonDirStore` (a sync and an async store may
    share one directory).  Open one with ``await AsyncJsonDirStore.open(directory)`` or
    ``await AsyncJsonDirStore.from_url(url)``; ``await store.close()`` stops its thread, after
    which every call raises ``StoreError``.
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    spec = SPEC

    @classmethod
    async def open(cls, directory: str | os.PathLike[str], **options: Any) -> Self:
        """Open (creating it when missing) the store in ``directory``, in its worker thread.

        Options as for :class:`JsonDirStore`: ``trace_max``, ``fsync``, ``lock_timeout``.
        """
        factory = functools.partial(JsonDirStore, directory, **options)
        return await cls.start(factory, name=f"harel-jsondir-{Path(directory).name}")

    @property
    def directory(self) -> Path:
        """The absolute directory holding the data."""
        return self.store.directory
