"""The store error hierarchy: every failure a store raises is a :class:`StoreError`."""

from __future__ import annotations


class StoreError(RuntimeError):
    """Base class of every error a store raises on purpose."""


class StoreConflict(StoreError):
    """The compare-and-set lost: the stored version is not the one the caller held.

    Nothing of the commit is visible and ``exe.version`` is back at ``expected``.
    Reload the execution and re-apply the step.
    """

    def __init__(self, execution_id: str, expected: int, found: int | None) -> None:
        self.execution_id = execution_id
        self.expected = expected
        self.found = found
        if found is None:
            stored = "found no stored record"
        elif found == expected:
            stored = (
                f"found version {found} written by another commit than this copy's (the "
                "execution was purged and re-created, or rewritten, since this copy was stored)"
            )
        else:
            stored = f"found stored version {found}"
        super().__init__(
            f"execution {execution_id!r}: expected version {expected}, {stored}; "
            "reload it and retry the step"
        )

    def __reduce__(self) -> tuple[type[StoreConflict], tuple[str, int, int | None]]:
        return (type(self), (self.execution_id, self.expected, self.found))


class AlreadyProcessed(StoreConflict):
    """The commit carried a ``processed_event_id`` the execution had already recorded: the
    event was processed before, and nothing of this commit was written (no snapshot, emit,
    timer, spawn or trace step; ``exe.version`` is back at ``expected``).

    Drop the step: load the execution to see the state the first delivery left.
    """

    def __init__(self, execution_id: str, event_id: str, expected: int, found: int | None) -> None:
        StoreError.__init__(
            self,
            f"execution {execution_id!r} already processed event {event_id!r}; nothing of this "
            "commit was written (load the execution to see the first delivery's result)",
        )
        self.execution_id = execution_id
        self.event_id = event_id
        self.expected = expected
        self.found = found

    def __reduce__(  # type: ignore[override]
        self,
    ) -> tuple[type[AlreadyProcessed], tuple[str, str, int, int | None]]:
        return (type(self), (self.execution_id, self.event_id, self.expected, self.found))


class ExecutionAlreadyExists(StoreError):
    """An execution with this id is already stored; pick another id or load the existing one."""

    def __init__(self, execution_id: str) -> None:
        self.execution_id = execution_id
        super().__init__(f"execution {execution_id!r} already exists")

    def __reduce__(self) -> tuple[type[ExecutionAlreadyExists], tuple[str]]:
        return (type(self), (self.execution_id,))


class ExecutionActive(StoreError):
    """``purge`` refused an execution that has not finished; finish or cancel it first, or pass
    ``force=True`` to remove it anyway."""

    def __init__(self, execution_id: str, status: str) -> None:
        self.execution_id = execution_id
        self.status = status
        super().__init__(
            f"execution {execution_id!r} is {status}, not finished; purge(..., force=True) "
            "removes it anyway"
        )

    def __reduce__(self) -> tuple[type[ExecutionActive], tuple[str, str]]:
        return (type(self), (self.execution_id, self.status))


class ExecutionNotFound(StoreError, KeyError):
    """The named execution is not stored."""

    def __init__(self, execution_id: str) -> None:
        self.execution_id = execution_id
        super().__init__(f"execution {execution_id!r} is not stored")

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return str(self.args[0])

    def __reduce__(self) -> tuple[type[ExecutionNotFound], tuple[str]]:
        return (type(self), (self.execution_id,))


class StoreUnavailable(StoreError):
    """The database could not be reached or is busy; the operation may be retried as is.

    Raised by a write, this plain class means nothing was written (the request never reached
    the server, or the server refused it whole); when the outcome is not known the store raises
    the subclass :class:`CommitOutcomeUnknown` instead."""

    retryable = True


class CommitOutcomeUnknown(StoreUnavailable):
    """A write's request may have reached the server, but no answer came back: it may or may
    not be stored.

    Raised only when the request may have been delivered; every other failure of a write
    guarantees that nothing was written.  ``exe.version`` is back at ``expected``.  Settle it by
    re-sending the same commit — the same ``Execution`` object with the same arguments: the
    store recognises it by its commit token and answers as the original would (stored: success,
    ``exe.version`` bumped, nothing written twice; not stored: it is applied now; another
    writer's commit won the version: :class:`StoreConflict`).
    """

    def __init__(self, execution_id: str, expected: int, detail: str = "") -> None:
        self.execution_id = execution_id
        self.expected = expected
        self.detail = detail
        cause = f" ({detail})" if detail else ""
        super().__init__(
            f"execution {execution_id!r}: the commit from version {expected} may or may not be "
            f"stored{cause}; re-send the same commit (same execution object, same arguments) "
            "once the store is reachable: it answers as the original would"
        )

    def __reduce__(self) -> tuple[type[CommitOutcomeUnknown], tuple[str, int, str]]:
        return (type(self), (self.execution_id, self.expected, self.detail))


class StoreCorrupted(StoreError):
    """Stored data (a record, a file, a schema) cannot be read as what it should be.

    The message names what is damaged (an execution id, a relay entry, a database path); the
    operation is not retryable as is.
    """


class InvalidCursor(StoreError, ValueError):
    """A listing cursor that this store did not produce (or that is corrupted)."""


class PayloadTooLarge(StoreError, ValueError):
    """A document or batch exceeds what the backend can store in one atomic write."""


class InvalidPayload(StoreError, ValueError):
    """A value cannot be encoded as JSON by the shared codec (names the offending part)."""


class InvalidArgument(StoreError, ValueError):
    """An argument of a store method is out of the range every backend serves (a ``seq``,
    ``limit``, ``now`` or ``fire_at``, a status filter); the message names it and the range.
    Rules: :mod:`harel.store.common.limits`."""


class InvalidIdentifier(InvalidPayload, InvalidArgument):
    """An id or state path no backend can store as a key: empty (ids), longer than
    ``MAX_ID_BYTES`` in UTF-8, or holding NUL or a lone surrogate.  Raised by ``commit``
    before anything is written and by every read method given such an id."""


class InvalidStoreURL(StoreError, ValueError):
    """A store URL that cannot be parsed or names an unknown option (the password is redacted)."""


class InvalidStoreOption(InvalidStoreURL, TypeError):
    """A store option (URL query or keyword) that is unknown or out of its declared range; the
    message names it (never a secret's value).  Also a ``TypeError``, as for any bad keyword."""


class SchemaVersionError(StoreError):
    """The stored schema was written by an incompatible release of the backend."""


class StoreConfigError(StoreError, ValueError):
    """A store setting (an environment variable or option) is missing or invalid.

    The message names the variable and says what to set.
    """


class HarelTestingNotInstalled(StoreConfigError, ImportError):
    """Test support that lives in the test-only distribution ``harel-testing`` (a stand-in
    server, a server launcher, a request linter) or in a package one of its extras brings is not
    installed; the message names the missing module and has the ``pip install`` line.  Runtime
    wheels never depend on it: install it where the tests run."""

    def __init__(self, missing: str, extra: str = "") -> None:
        self.missing = missing
        self.extra = extra
        super().__init__(
            f"this needs the test-only distribution harel-testing ({missing!r} is not "
            f"installed): {self.pip_line}"
        )

    @property
    def pip_line(self) -> str:
        """The command that installs the missing test support."""
        suffix = f"[{self.extra}]" if self.extra else ""
        return f"pip install harel-testing{suffix}"

    def __reduce__(self) -> tuple[type[HarelTestingNotInstalled], tuple[str, str]]:
        return (type(self), (self.missing, self.extra))


class UnsupportedEventLoop(StoreError):
    """An async store method was awaited where it cannot run: outside any async library, or
    under one that is neither asyncio nor trio, or (an injected driver client) under trio
    although the client runs on asyncio only.  The message says what to use instead.
    """


class BackendError(StoreError):
    """Base class of the plugin registry's errors (backend lookup, plugin problems)."""


class PluginError(BackendError, ValueError):
    """A store plugin registered something invalid or conflicting, or failed to load."""


class UnknownBackend(BackendError, LookupError):
    """No installed backend has this name; the message lists the installed ones."""


class UnknownScheme(UnknownBackend, InvalidStoreURL):
    """No installed backend handles this URL scheme.

    The message lists the installed schemes and, when the scheme belongs to a first-party
    backend, the ``pip install`` line that provides it.
    """


class BackendNotInstalled(UnknownBackend, ImportError):
    """A first-party backend that is not installed; the message has the ``pip install`` line."""

    def __init__(self, message: str, *, distribution: str = "") -> None:
        super().__init__(message)
        self.distribution = distribution

    @property
    def pip_line(self) -> str:
        """The command that installs the missing backend."""
        return f"pip install {self.distribution}"

    def __reduce__(self) -> tuple[type[BackendNotInstalled], tuple[str], dict[str, str]]:
        return (type(self), (str(self.args[0]),), {"distribution": self.distribution})


class BackendUnavailable(BackendError):
    """The backend is installed but cannot be used (broken, incompatible, disabled, conflicting,
    or its classes fail to import); the message says why and what to do."""


class HarnessUnavailable(BackendError):
    """The backend ships no conformance harness, so ``harel conformance URL`` cannot test it."""


class StoreNotFound(StoreError, LookupError):
    """A store opened with ``create=False`` (read-only commands) does not exist yet: no
    database file, schema or dataset at that URL; nothing was created."""


class LeaseLost(StoreError):
    """``renew`` or ``release`` named a lease the caller does not hold: it was never claimed by
    that owner, it was released, it was taken over by another claimer after it expired, or (for
    ``renew``) it has expired.  Stop working on that execution's claim — whatever was not acked
    is claimed again by someone — and claim afresh.

    ``holder`` is the owner that holds the lease now (``None``: nobody, or unknown).
    """

    def __init__(self, execution_id: str | None, owner: str, why: str, holder: str | None = None):
        self.execution_id = execution_id
        self.owner = owner
        self.why = why
        self.holder = holder
        group = "the untargeted outbox" if execution_id is None else f"execution {execution_id!r}"
        super().__init__(
            f"the lease on {group} is not held by {owner!r}: {why}; stop working on this claim "
            "and claim again (what was not acked is claimed again)"
        )

    def __reduce__(self) -> tuple[type[LeaseLost], tuple[str | None, str, str, str | None]]:
        return (type(self), (self.execution_id, self.owner, self.why, self.holder))
