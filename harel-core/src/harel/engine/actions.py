"""What an action receives: the ``stm`` handle, and how action targets are resolved.

An action is ``fn(stm, event, **inputs)`` (sync or ``async def``).  ``stm.execution_ctx`` is
the live context dict (mutate it to persist data), ``stm.idempotency_key`` is identical on a
redelivery of the same event (``f"{execution_id}:{version}:{n}"``), and ``stm.send`` appends
an event to the outbox of the very commit this step makes (engine.md §2.10).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from harel.model import Event
from harel.store.contract import Emit


class ActionContext:
    """The ``stm`` object handed to an action while the runner drives one step."""

    __slots__ = ("_emits", "execution_ctx", "execution_id", "idempotency_key")

    def __init__(
        self,
        execution_id: str,
        execution_ctx: dict[str, Any],
        idempotency_key: str,
        emits: list[Emit],
    ) -> None:
        self.execution_id = execution_id
        self.execution_ctx = execution_ctx
        self.idempotency_key = idempotency_key
        self._emits = emits

    def __repr__(self) -> str:
        return f"ActionContext({self.execution_id!r}, key={self.idempotency_key!r})"

    def send(self, target_id: str, event: Event) -> None:
        """Deliver ``event`` to execution ``target_id`` once this step commits (via the outbox).

        Dropped if the step fails; delivered at least once otherwise (dedupe on ``event.id``).
        """
        if not isinstance(target_id, str) or not target_id:
            raise TypeError(f"stm.send needs a non-empty target id, got {target_id!r}")
        if not isinstance(event, Event):
            raise TypeError(f"stm.send needs an Event, got {type(event).__name__}")
        self._emits.append((target_id, event))


def resolve_action(target: Callable[..., Any] | str) -> Callable[..., Any]:
    """The callable behind an action target: itself, or ``module.attr`` imported now.

    Raises ``ImportError`` naming the dotted path when it cannot be resolved.
    """
    if callable(target):
        return target
    module_name, _, attr = target.rpartition(".")
    if not module_name:
        raise ImportError(f"action {target!r} is not a dotted 'module.attr' path")
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ImportError(f"cannot resolve action {target!r}: {err}") from err
    if not callable(found):
        raise ImportError(f"action {target!r} is not callable")
    return found  # type: ignore[no-any-return]
