"""What a plan yields (one DynamoDB call, or a pause) and the driver-level outcomes it is told.

Driver-free: the plans in :mod:`harel_store_dynamodb._plan` yield :class:`Call` and
:class:`Pause`; ``sync.py`` and ``aio.py`` execute them and translate every driver exception
through :mod:`harel_store_dynamodb._errors` into the classes below (or another
:mod:`harel.store.errors` type), which the drive loop throws back into the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harel.store.errors import StoreError, StoreUnavailable


@dataclass(frozen=True, slots=True)
class Call:
    """One request: the low-level client method (``"transact_write_items"``) and its arguments.

    Every user value travels inside ``params`` as a typed attribute value (``{"S": ...}``) in
    ``Key``/``Item``/``ExpressionAttributeValues``; expressions only name placeholders.
    """

    operation: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Pause:
    """Sleep ``seconds`` before the next request (backoff; waiting for a table to be ACTIVE)."""

    seconds: float


Request = Call | Pause


class TransactionCancelled(StoreError):
    """``TransactWriteItems`` was cancelled; ``reasons`` holds one entry per action, in order.

    Each reason is DynamoDB's ``{"Code": ..., "Message": ..., "Item": ...}``; ``Code`` is
    ``"None"`` for actions that did not cause the cancellation.  Plans turn it into a typed error.
    ``retried``: the client sent the request more than once (an earlier send may have landed).
    """

    def __init__(self, reasons: list[dict[str, Any]], *, retried: bool = False) -> None:
        self.reasons = reasons
        self.retried = retried
        codes = ", ".join(str(reason.get("Code")) for reason in reasons)
        super().__init__(f"DynamoDB cancelled the transaction ({codes})")

    def codes(self) -> list[str]:
        """The reason codes by action index (``"None"`` where that action was fine)."""
        return [str(reason.get("Code") or "None") for reason in self.reasons]


class ConditionFailed(StoreError):
    """A single-item write's ``ConditionExpression`` was false (plans decide what it means).

    ``item`` is the stored item when the request asked for it (``ALL_OLD``); ``retried`` as in
    :class:`TransactionCancelled`.
    """

    def __init__(self, item: dict[str, Any] | None = None, *, retried: bool = False) -> None:
        self.item = item
        self.retried = retried
        super().__init__("the conditional write was not applied")


class TableNotFound(StoreUnavailable):
    """The table does not exist (yet): not created, being deleted, or another region."""


class TableInUse(StoreUnavailable):
    """``CreateTable`` raced with another creator (or the table is being created/deleted)."""


class RequestInDoubt(StoreUnavailable):
    """The request was sent but its answer was lost (timeout, reset, 5xx): it may have applied.

    Retryable; a commit resolves the doubt with one consistent read of its commit token.
    """


class ItemBusy(StoreUnavailable):
    """DynamoDB refused a request whole because the item is busy: ``TransactionConflictException``
    (the item is part of another in-flight transaction) or throttling.  Nothing of the request
    was applied by this send; ``retried``: the client had sent it before (botocore's own
    retries), and an earlier send may have been applied."""

    def __init__(self, message: str, *, retried: bool = False) -> None:
        self.retried = retried
        super().__init__(message)
