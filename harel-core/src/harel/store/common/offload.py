"""asyncio or trio: which async library awaits a store, and the thread offload for the others.

Every async store runs under asyncio and under trio.  Where its driver runs on both (the
:class:`~harel.store.common.ThreadedRunner` stores: sqlite, libsql, rqlite, jsondir, any
third-party :class:`~harel.store.author.ThreadedAsyncStore`; the memory store) nothing changes
but the way results come back to the caller's loop.  Where the driver is asyncio-only
(``psycopg`` async, ``redis.asyncio``, PyMongo's async client, aioboto3), the async store
opened under trio holds its backend's *sync* store instead and runs each contract call whole
(a whole commit: every statement of it) through ``anyio.to_thread.run_sync`` with a
:class:`anyio.CapacityLimiter` of one token per store object: one operation of a store at a
time, in a worker thread, as its sync driver needs.

Cancellation (:class:`Offload`): a call that has not got its token yet is withdrawn and never
runs; once started it is never abandoned: the caller waits for it to end, then sees the
cancellation.  A cancelled ``commit`` has therefore either stored nothing (``exe.version``
restored by the sync store) or everything (``exe.version`` bumped), as under asyncio.

The library is detected per call (:func:`current_library`): an asyncio loop running in this
thread is asyncio, otherwise sniffio (installed with trio) names the library.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from harel.store.errors import UnsupportedEventLoop

__all__ = ["Offload", "current_library", "on_asyncio"]

T = TypeVar("T")

SUPPORTED = ("asyncio", "trio")


def on_asyncio() -> bool:
    """True when an asyncio event loop runs in this thread (the cheap check first)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def current_library() -> str:
    """``"asyncio"`` or ``"trio"``: the async library running the calling task.

    Raises :class:`~harel.store.errors.UnsupportedEventLoop` outside any async library and
    under any other one (the message says what to do).
    """
    if on_asyncio():
        return "asyncio"
    try:
        import sniffio
    except ImportError:
        raise UnsupportedEventLoop(
            "no asyncio event loop is running in this thread and sniffio (installed with "
            "trio) is missing; await async store methods from asyncio or trio "
            "(`anyio.run(main)` or `anyio.run(main, backend='trio')`)"
        ) from None
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        raise UnsupportedEventLoop(
            "an async store method was called outside any event loop; await it inside "
            "`anyio.run(main)` / `asyncio.run(main())` / `trio.run(main)`, or use the sync store"
        ) from None
    if library not in SUPPORTED:
        raise UnsupportedEventLoop(
            f"async stores run under asyncio or trio, not {library!r}; run them under one "
            "of those (anyio.run(main, backend='trio')) or use the sync store"
        )
    return library


class Offload:
    """Runs one sync callable at a time in anyio's worker threads (one store's limiter).

    Guarantees: calls through one ``Offload`` never overlap (a one-token
    :class:`anyio.CapacityLimiter`, made at first use in the running loop); a call cancelled
    before it got the token never runs; a started call is never abandoned: it ends, then the
    caller's cancellation is raised.
    """

    __slots__ = ("_limiter",)

    def __init__(self) -> None:
        self._limiter: anyio.CapacityLimiter | None = None

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a worker thread; its result or its exception."""
        limiter = self._limiter
        if limiter is None:
            limiter = self._limiter = anyio.CapacityLimiter(1)
        call = partial(fn, *args, **kwargs) if args or kwargs else fn
        result = await anyio.to_thread.run_sync(call, abandon_on_cancel=False, limiter=limiter)
        # A cancel that arrived while the call ran is the caller's to see now (as under asyncio).
        await anyio.lowlevel.checkpoint_if_cancelled()
        return result
