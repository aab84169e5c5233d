"""The driver's word to the plan that a request may have reached the server unanswered.

Driver-free (the plan imports it): the drivers raise :class:`RequestOutcomeUnknown` when a
statement was handed to the connection and the connection broke before the answer came back;
the plan turns it into :class:`~harel.store.errors.CommitOutcomeUnknown` for a commit's write.
"""

from __future__ import annotations

from harel.store.errors import StoreUnavailable


class RequestOutcomeUnknown(StoreUnavailable):
    """A statement was sent (or partly sent) and no answer came back: it may have been applied.

    Outside a commit (an ack, a purge, a timer delete) it reaches the caller as it is: a
    :class:`StoreUnavailable` whose message says the write may or may not have happened (each
    of those writes may be repeated safely).
    """

    def __init__(self, where: str, detail: str) -> None:
        self.where = where
        self.detail = detail
        super().__init__(
            f"PostgreSQL at {where}: the connection broke after the request was sent "
            f"({detail}); a write may or may not have been applied (a read can simply be "
            "retried)"
        )

    def __reduce__(self) -> tuple[type[RequestOutcomeUnknown], tuple[str, str]]:
        return (type(self), (self.where, self.detail))
