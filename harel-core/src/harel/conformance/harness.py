"""What a backend hands the conformance kit: one isolated, initially EMPTY dataset per test.

A backend's tests define a function-scoped pytest fixture named ``harel_harness`` that
returns a :class:`StoreHarness` (and tears it down).  The kit opens stores through it: every
``open_sync()`` / ``open_async()`` call returns a *new* store object over the *same* dataset,
which is how restart ("reopen") and two-writer tests are written.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from harel.store.contract import AsyncExecutionStore, Capabilities, ExecutionStore


class StoreHarness(ABC):
    """One isolated dataset of a backend.  Subclasses must set ``capabilities`` explicitly."""

    capabilities: ClassVar[Capabilities]

    @abstractmethod
    def open_sync(self) -> ExecutionStore:
        """A new sync store over this harness's dataset (created empty on first use)."""

    @abstractmethod
    async def open_async(self) -> AsyncExecutionStore:
        """A new async store over this harness's dataset."""

    def destroy(self) -> None:  # noqa: B027 - optional hook
        """Drop the dataset (a temp file, schema, key prefix or table); called after the test."""

    def describe(self) -> str:
        """A short human label for reports (e.g. the backend name and where its data lives)."""
        return type(self).__name__
