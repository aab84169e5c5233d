"""``JsonDirStore``: the synchronous jsondir store (executions as JSON files in a directory).

Lifecycle and one drive loop: every contract method comes from
:class:`~harel.store.author.PlanStore` and runs one operation of
:class:`~harel_example_jsondir._plan.JsonDirPlan` whole under the directory lock (:meth:`_run`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import ClassVar, TypeVar

from harel.store.author import FromUrl, PlanStore, drive
from harel.store.contract import DEFAULT_TRACE_MAX, Capabilities

from harel_example_jsondir._files import JsonDirectory
from harel_example_jsondir._plan import PLAN, JsonDirPlan, Plan
from harel_example_jsondir._spec import CAPABILITIES, DEFAULT_LOCK_TIMEOUT, SPEC

T = TypeVar("T")


class JsonDirStore(FromUrl, PlanStore[JsonDirPlan]):
    """An :class:`~harel.store.contract.ExecutionStore` over a directory of JSON files.

    Every operation holds the directory's file lock, so any number of store objects, threads
    and processes may share one directory; every commit, purge and import is all-or-nothing
    on disk, including across a crash (see :mod:`harel_example_jsondir._files`).  Holds no
    open file between calls.  Correct rather than fast: each operation reads ``state.json``.
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    spec = SPEC  # from_url("jsondir:///abs/dir?fsync=false"): see _spec

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        fsync: bool = True,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        """Open (creating it when missing) the store in ``directory``; blocks on the lock.

        Creates the layout in an empty directory and upgrades an older layout format in
        place; refuses a newer one (``SchemaVersionError``) before writing anything.
        """
        self._dir = JsonDirectory(directory, fsync=fsync, lock_timeout=lock_timeout)
        self._plan = PLAN
        self.trace_max = trace_max
        self._run(self._plan.open_directory(time.time()))

    @property
    def directory(self) -> Path:
        """The absolute directory holding the data."""
        return self._dir.root

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self._dir.root)!r})"

    def _run(self, operation: Plan[T]) -> T:
        """Run one operation whole under the directory lock."""
        with self._dir.locked():
            return drive(operation, self._dir.execute)

    def close(self) -> None:
        """Nothing to release: the store holds no open file between calls."""
