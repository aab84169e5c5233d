"""The drive loops of sans-IO plans: one for sync drivers, one for async drivers.

A backend writes each multi-step operation once, as a generator that yields requests (a
statement, a command, a document update) and receives each request's result; its ``sync.py``
and ``aio.py`` differ only in the ``execute`` callable they hand to :func:`drive` or
:func:`adrive`.  The generator returns the operation's value or raises its typed error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

Request = TypeVar("Request")
Result = TypeVar("Result")

Plan = Generator[Request, Any, Result]
"""A sans-IO operation: yields requests, is sent each request's result, returns the value."""


def drive(plan: Generator[Request, Any, Result], execute: Callable[[Request], Any]) -> Result:
    """Run ``plan`` to completion, executing every request it yields with ``execute``.

    An exception raised by ``execute`` is thrown into the plan (so the plan may map or handle
    it); whatever the plan raises propagates.  The plan is closed on every exit.
    """
    try:
        request = next(plan)
        while True:
            try:
                result = execute(request)
            except Exception as exc:
                request = plan.throw(exc)
            else:
                request = plan.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        plan.close()


async def adrive(
    plan: Generator[Request, Any, Result], execute: Callable[[Request], Awaitable[Any]]
) -> Result:
    """The async twin of :func:`drive`: ``execute`` is awaited for every request.

    Cancellation is not thrown into the plan: the ``CancelledError`` propagates to the driver,
    which owns the transaction and must leave it closed (rolled back or committed) either way.
    """
    try:
        request = next(plan)
        while True:
            try:
                result = await execute(request)
            except Exception as exc:
                request = plan.throw(exc)
            else:
                request = plan.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        plan.close()
