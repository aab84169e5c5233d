"""What a backend hands the conformance kit: one isolated, initially EMPTY dataset per test.

A backend's tests define a function-scoped pytest fixture named ``harel_harness`` that
returns a :class:`StoreHarness` (and tears it down).  The kit opens stores through it: every
``open_sync()`` / ``open_async()`` call returns a *new* store object over the *same* dataset,
which is how restart ("reopen") and two-writer tests are written.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from harel.store.contract import AsyncExecutionStore, Capabilities, ExecutionStore


@dataclass(frozen=True, slots=True)
class RawSide:
    """The side writes of one :meth:`StoreHarness.raw_side_commit` call, already encoded: what a
    commit with one emit, a dedupe mark, a timer and a trace step stores beside the document.

    ``emit`` is the JSON of an event for an outbox entry targeted at the execution itself;
    ``event_id`` (recorded at ``now``) is the dedupe mark; the timer at ``timer_path`` fires at
    ``fire_at`` (an upsert: the same path is scheduled again on every call); ``trace`` is the
    JSON of one trace step, stored at index ``trace_index`` (the bench counts them).
    """

    emit: str
    event_id: str
    now: float
    timer_path: str
    fire_at: float
    trace_index: int
    trace: str


RawSideCommit = Callable[[str, int, str, RawSide], None]
"""``(execution_id, expected_version, document_json, side)``: see
:meth:`StoreHarness.raw_side_commit`."""


class StoreHarness(ABC):
    """One isolated dataset of a backend.  Subclasses must set ``capabilities`` explicitly."""

    capabilities: ClassVar[Capabilities]

    fast_stateful_examples: ClassVar[int | None] = None
    """At most this many examples of the kit's stateful test under the ``fast`` profile
    (``make test``), for a stand-in whose every request is slow (moto's DynamoDB); the
    ``thorough`` and ``reliability`` profiles ignore it.  ``None``: the profile decides."""

    @abstractmethod
    def open_sync(self) -> ExecutionStore:
        """A new sync store over this harness's dataset (created empty on first use)."""

    @abstractmethod
    async def open_async(self) -> AsyncExecutionStore:
        """A new async store over this harness's dataset."""

    def url(self) -> str | None:
        """A store URL that a *fresh interpreter* can open over this same dataset.

        The kit uses it to verify the ``persistent`` (reopen in a new process, read everything
        back) and ``multi_process`` (two processes racing commits) capabilities.  ``None`` when
        the dataset cannot be reached from another process; a harness that returns ``None``
        must not declare either capability.
        """
        return None

    @abstractmethod
    def footprint(self, execution_id: str) -> list[str]:
        """Everything this dataset stores that belongs to ``execution_id``, one label per record.

        Read straight from the storage (not through the contract): the execution record, each
        dedupe mark, timer, outbox entry targeted at it, spawn intent it wrote and trace step,
        e.g. ``["execution", "processed:e1", "timer:A.B", "outbox:3", "trace:0"]``, and every
        derived record kept for the id (a trace counter, index entries, a per-id key or
        folder).  Only records stored under exactly this id: never those of an id that merely
        starts with it.  The kit asserts it is empty after ``purge`` and that a purge, a refused
        commit or another id's purge leaves it unchanged otherwise.
        """

    def raw_commit(self) -> Callable[[str, int, str], None] | None:
        """The driver's cheapest equivalent of a state-only commit, for the benchmarks.

        The callable, given ``(execution_id, expected_version, document_json)``, does ONE
        compare-and-set write in its own transaction on a connection of its own (SQL: one
        ``UPDATE ... WHERE id = ? AND version = ?``; Redis: one ``SET``; rqlite: one
        ``/db/execute``; DynamoDB: one conditional ``UpdateItem``/``PutItem``; Mongo: one
        ``update_one``), with the same connection settings as the harness's stores.  The bench
        first commits the execution through a store (version 1), then calls it with versions
        1, 2, ...; the write may go to the store's own record or to a scratch record that
        :meth:`destroy` removes.  ``None`` (the default): the backend has no raw equivalent.
        """
        return None

    def raw_side_commit(self) -> RawSideCommit | None:
        """The driver's cheapest equivalent of a commit with side writes, for the benchmarks.

        Like :meth:`raw_commit` (same arguments, same CAS on the document, a connection of its
        own with the stores' settings, called with versions 1, 2, ... after one store commit),
        plus the :class:`RawSide` rows written in the SAME transaction or atomic request: the
        outbox entry, the dedupe mark, the timer upsert and the trace step (SQL: ``BEGIN`` +
        the ``UPDATE`` + three ``INSERT`` and an upsert + ``COMMIT``; Redis: one ``MULTI``/
        ``EXEC``; DynamoDB: one ``TransactWriteItems``; Mongo: one ``update_one`` where the
        side records live in the document, else what its layout needs).  Nothing else: no
        trace ring trimming, no listing index, no found-version read.  Figure 2 reports the
        store's side commit against it.  ``None`` (the default): no raw equivalent.
        """
        return None

    def server_address(self) -> tuple[str, int] | None:
        """The TCP address (host, port) the stores of this dataset talk to, for the kit's
        lost-reply tests (:mod:`harel.conformance.suite.lost_reply`): the kit puts a
        :class:`~harel.conformance.proxy.FaultProxy` in front of it and opens stores through
        :meth:`open_sync_at` / :meth:`open_async_at`.  ``None`` (the default): the store does
        not talk to a server over TCP (an embedded file, an in-process fake), and the lost-reply
        tests are skipped."""
        return None

    def open_sync_at(self, host: str, port: int) -> ExecutionStore:
        """A new sync store over this dataset that connects to ``host:port`` (a proxy in front
        of :meth:`server_address`) instead, with every other setting unchanged; it must resend
        or fail within a few seconds when a connection is cut (short connect retries)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement open_sync_at")

    async def open_async_at(self, host: str, port: int) -> AsyncExecutionStore:
        """The async twin of :meth:`open_sync_at`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement open_async_at")

    def destroy(self) -> None:  # noqa: B027 - optional hook
        """Drop the dataset (a temp file, schema, key prefix or table); called after the test."""

    def describe(self) -> str:
        """A short human label for reports (e.g. the backend name and where its data lives)."""
        return type(self).__name__
