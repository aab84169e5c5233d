"""The commit envelope: validate and serialise a step once, and keep ``exe.version`` honest.

A backend's ``commit`` is::

    with committing(exe, emits, processed_event_id, timers, spawns, trace,
                    max_document_bytes=MY_LIMIT) as plan:
        ...send plan to the database; raise conflict(plan, found) when the CAS is lost...

``committing`` bumps ``exe.version`` before serialising (so the stored document carries the
new version) and restores it on *any* exception, including encoding errors and driver errors.
Before it yields, every input has passed the rules of :mod:`harel.store.common.limits`: ids
and paths are usable keys (``InvalidIdentifier``), every payload reads back equal
(``InvalidPayload`` naming the field), every encoded document fits ``max_document_bytes``
(``PayloadTooLarge``) — so a refused commit has written nothing, on every backend alike.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, NamedTuple, TypeVar

from harel.model import Event, Execution, Status
from harel.store.common.codec import check_max_bytes, dumps, encode_event, encode_execution
from harel.store.common.limits import MAX_DOCUMENT_BYTES, MAX_INT
from harel.store.common.payload_scan import key_ok
from harel.store.common.trace import encode_trace_step
from harel.store.common.validate import check_id, check_path
from harel.store.contract import Emit, Spawn, TimerOp
from harel.store.errors import (
    AlreadyProcessed,
    CommitOutcomeUnknown,
    InvalidPayload,
    StoreConflict,
    StoreError,
    StoreUnavailable,
)


@dataclass(frozen=True, slots=True)
class PreparedEmit:
    """One outbox row: target and the encoded event."""

    target_id: str | None
    event_id: str
    event_json: str


@dataclass(frozen=True, slots=True)
class PreparedSpawn:
    """One spawn row: the child to create and its encoded initial context."""

    child_id: str
    root_path: str
    context_json: str


class PreparedCommit(NamedTuple):
    """Everything one commit writes, validated and encoded, ready for any backend's plan.

    Immutable (a named tuple: built on every commit's path, where a frozen dataclass's
    field-by-field ``__init__`` costs about a microsecond more); ``_replace`` gives a variant.
    """

    execution_id: str
    expected_version: int
    new_version: int
    definition_id: str
    status: str
    outcome: str | None
    active_path: str | None
    parent_id: str | None
    document: str
    emits: tuple[PreparedEmit, ...]
    processed_event_id: str | None
    timers: tuple[TimerOp, ...]
    spawns: tuple[PreparedSpawn, ...]
    trace: str | None
    committed_at: float
    """Epoch seconds (this process's clock) stored as the summary's ``updated_at`` and as the
    dedupe mark's age for ``prune_processed``."""
    token: str = ""
    """The commit token (:func:`committing`): stored as the receipt of ``new_version``; a CAS
    miss whose receipt is this token means the commit was already stored."""
    priority: int = 0
    """``Execution.priority`` (0-4): the priority of the work rows the commit touches
    (:func:`harel.store.common.claims.work_touches`)."""
    base: str | None = None
    """The fence of a copy this process stored itself: the receipt (token) of
    ``expected_version`` when this very ``Execution`` object's last successful commit wrote
    that version (:func:`committing`), else ``None``.  A store applies an update carrying
    it only while the stored version's receipt is still this token, so a copy of an execution
    that was purged and re-created (or rewritten) up to the same version is refused with
    ``StoreConflict`` instead of overwriting the new one."""
    summary_stored: bool = False
    """True only with a :attr:`base`: the commit that stored it wrote the very summary columns
    this one writes (``definition_id``, ``status``, ``outcome``, ``active_path``,
    ``parent_id``).  While the fence holds the stored row is that commit's, so it already
    holds them: an update need neither rewrite nor check them."""

    @property
    def is_insert(self) -> bool:
        """True when the caller believes the execution was never stored."""
        return self.expected_version == 0

    @property
    def has_side_writes(self) -> bool:
        """True when the commit writes more than the execution (an emit, a dedupe mark, a
        timer op, a spawn or a trace step)."""
        return bool(
            self.emits
            or self.spawns
            or self.timers
            or self.processed_event_id is not None
            or self.trace is not None
        )

    @property
    def schedules(self) -> tuple[TimerOp, ...]:
        """The collapsed ``schedule`` ops."""
        return tuple(op for op in self.timers if op.action == "schedule")

    @property
    def cancels(self) -> tuple[TimerOp, ...]:
        """The collapsed ``cancel`` ops."""
        return tuple(op for op in self.timers if op.action == "cancel")


_COMMITTED_AT = PreparedCommit._fields.index("committed_at")
_SUMMARY = slice(
    PreparedCommit._fields.index("definition_id"), PreparedCommit._fields.index("parent_id") + 1
)
"""The summary columns of a :class:`PreparedCommit` (``definition_id``, ``status``,
``outcome``, ``active_path``, ``parent_id``: adjacent fields)."""
_NEW_VERSION = PreparedCommit._fields.index("new_version")
_TOKEN = PreparedCommit._fields.index("token")
_new_commit = tuple.__new__
"""``_new_commit(PreparedCommit, values)``: the tuple built in C, without the named tuple's
Python-level ``__new__`` (every commit builds one)."""

CommitArgs = tuple[Sequence[Emit], str | None, Sequence[TimerOp], Sequence[Spawn], Any]
"""A commit's arguments after the execution: emits, processed_event_id, timers, spawns, trace."""

CasDecision = Literal["update", "insert", "conflict"]


def cas_decision(expected: int, found: int | None) -> CasDecision:
    """The contract's CAS rule given the stored version (``None`` = no record)."""
    if found is None:
        return "insert" if expected == 0 else "conflict"
    return "update" if found == expected else "conflict"


def conflict(plan: PreparedCommit, found: int | None) -> StoreConflict:
    """The :class:`StoreConflict` a lost CAS on ``plan`` raises."""
    return StoreConflict(plan.execution_id, plan.expected_version, found)


def already_processed(plan: PreparedCommit, found: int | None) -> AlreadyProcessed:
    """The :class:`AlreadyProcessed` a commit whose dedupe mark is already stored raises."""
    return AlreadyProcessed(
        plan.execution_id, plan.processed_event_id or "", plan.expected_version, found
    )


def base_holds(plan: PreparedCommit, receipt: str | None) -> bool:
    """Whether an update's fence holds: ``plan`` carries no :attr:`~PreparedCommit.base`, or
    ``receipt`` (the stored receipt of ``plan.expected_version``) is it."""
    return plan.base is None or receipt == plan.base


def refuse_lost(
    plan: PreparedCommit, found: int | None, receipt: str | None, marked: bool
) -> StoreConflict | None:
    """The error a commit that wrote nothing raises, in the contract's order — or ``None``
    when it was already stored (a re-send: answer success, write nothing again).

    ``found`` is the stored version (``None``: no record), ``receipt`` the stored receipt of
    ``plan.new_version`` (``None`` when unknown) and ``marked`` whether the execution already
    holds the dedupe mark of ``plan.processed_event_id``: a re-send of a stored commit first,
    then :class:`AlreadyProcessed`, then :class:`StoreConflict`."""
    if resent_and_stored(plan, found, receipt):
        return None
    if marked and plan.processed_event_id is not None:
        return already_processed(plan, found)
    return conflict(plan, found)


def collapse_timer_ops(ops: Sequence[TimerOp]) -> tuple[TimerOp, ...]:
    """Keep only the last op per path (in order of each path's last op).

    Applying the result in any order gives the same timers as applying ``ops`` in order.
    Each path must be a usable state path (``InvalidIdentifier``); ``fire_at`` ``-0.0`` is
    stored as ``0.0`` (the same instant; not every database keeps the sign of zero).
    """
    last: dict[str, TimerOp] = {}
    for index, op in enumerate(ops):
        if not isinstance(op, TimerOp):
            raise TypeError(f"timers[{index}] must be a TimerOp, got {type(op).__name__}")
        if not key_ok(op.path, empty_ok=True):
            check_path(op.path, f"timers[{index}].path")
        if not math.isfinite(op.fire_at):
            raise InvalidPayload(f"timers[{index}].fire_at must be finite, got {op.fire_at!r}")
        if op.fire_at == 0.0 and math.copysign(1.0, op.fire_at) < 0:
            op = TimerOp(op.action, op.path, 0.0)
        last.pop(op.path, None)
        last[op.path] = op
    return tuple(last.values())


_LISTS = (list, tuple)
"""An empty one of these skips the side-write preparation (a state-only commit); anything
else, empty or not, goes through the checks (an empty string is refused there)."""


def _items(value: Any, name: str) -> tuple[Any, ...]:
    if type(value) is tuple:
        return value
    if type(value) is list:
        return tuple(value)
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a sequence, got {type(value).__name__}")
    return tuple(value)


def _prepare_emits(emits: Sequence[Emit], max_bytes: int) -> tuple[PreparedEmit, ...]:
    prepared = []
    for index, item in enumerate(_items(emits, "emits")):
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError(
                f"emits[{index}] must be a (target_id, Event) tuple, got {type(item).__name__}"
            )
        prepared.append(prepare_emit(item[0], item[1], f"emits[{index}]", max_bytes))
    return tuple(prepared)


def prepare_emit(target: str | None, event: Event, what: str, max_bytes: int) -> PreparedEmit:
    """One outbox row, validated and encoded (``what`` names it in the errors): the target is
    a usable key, the event an :class:`Event` that reads back equal and fits ``max_bytes``."""
    if target is not None and not key_ok(target):
        check_id(target, f"{what} target id")
    if not isinstance(event, Event):
        raise TypeError(f"{what} event must be an Event, got {type(event).__name__}")
    json = encode_event(event, what=f"{what} event", max_bytes=max_bytes)
    return PreparedEmit(target, event.id, json)


def _prepare_spawns(spawns: Sequence[Spawn], max_bytes: int) -> tuple[PreparedSpawn, ...]:
    prepared = []
    for index, item in enumerate(_items(spawns, "spawns")):
        if not (isinstance(item, tuple) and len(item) == 3):
            raise TypeError(
                f"spawns[{index}] must be a (child_id, root_path, context) tuple, "
                f"got {type(item).__name__}"
            )
        child_id, root_path, context = item
        if not (key_ok(child_id) and key_ok(root_path, empty_ok=True)):
            check_id(child_id, f"spawns[{index}] child id")
            check_path(root_path, f"spawns[{index}] root path")
        if not isinstance(context, dict):
            raise TypeError(f"spawns[{index}] context must be a dict")
        context_json = dumps(context, what=f"spawns[{index}] context", max_bytes=max_bytes)
        prepared.append(PreparedSpawn(child_id, root_path, context_json))
    return tuple(prepared)


def _prepare(
    exe: Execution,
    expected_version: int,
    args: CommitArgs,
    limit: int,
    token: str = "",
    stored: StoredEntry | None = None,
) -> PreparedCommit:
    """:func:`committing` once ``exe`` is known to be an :class:`Execution`; ``token`` and
    ``stored`` (this object's :data:`_stored` entry for ``expected_version``: the fence and
    the summary it stored) complete it, so it is built once."""
    emits, processed_event_id, timers, spawns, trace = args
    if processed_event_id is not None and not key_ok(processed_event_id):
        check_id(processed_event_id, "processed_event_id")
    if trace is not None and not isinstance(trace, dict):
        raise TypeError(f"trace must be a dict or None, got {type(trace).__name__}")
    if limit is not MAX_DOCUMENT_BYTES:  # the shared ceiling needs no check
        check_max_bytes(limit)
    document = encode_execution(exe, max_bytes=limit)  # checks every field (the id too) first
    member = exe.status
    status: str = member._value_ if type(member) is Status else Status(member).value
    definition_id, outcome, active_path, parent_id = (
        exe.definition_id,
        exe.outcome,
        exe.active_path,
        exe.parent_id,
    )
    base, summary_stored = _fence(stored, (definition_id, status, outcome, active_path, parent_id))
    # positional, and built in C: on every commit
    prepared: PreparedCommit = _new_commit(
        PreparedCommit,
        (
            exe.id,  # execution_id
            expected_version,
            exe.version,  # new_version
            definition_id,
            status,
            outcome,
            active_path,
            parent_id,
            document,
            () if not emits and type(emits) in _LISTS else _prepare_emits(emits, limit),
            processed_event_id,
            ()
            if not timers and type(timers) in _LISTS
            else collapse_timer_ops(_items(timers, "timers")),
            () if not spawns and type(spawns) in _LISTS else _prepare_spawns(spawns, limit),
            None if trace is None else encode_trace_step(trace, max_document_bytes=limit),
            time.time(),  # committed_at
            token,
            exe.priority,
            base,
            summary_stored,
        ),
    )
    return prepared


RECEIPT_WINDOW = 8
"""Every store keeps the receipts (commit tokens) of at least this many latest versions of an
execution, so a commit re-sent after that many rival commits is still recognised."""

_ATTEMPTS_MAX = 4096
_attempts: dict[int, tuple[weakref.ref[Execution], PreparedCommit]] = {}
"""The last prepared commit per ``Execution`` object (by identity, held weakly), so a re-send
of the same commit reuses its token.  Bounded: the oldest half is dropped when full (a commit
re-sent after thousands of other objects' commits gets a fresh token and, if its first attempt
landed, a ``StoreConflict``: reload and check the dedupe mark)."""
_attempts_lock = threading.Lock()


K = TypeVar("K")
V = TypeVar("V")


def _remember(table: dict[K, V], key: K, value: V) -> None:
    """Set ``table[key]``, first dropping the oldest half when the table is full (callers hold
    ``_attempts_lock``)."""
    if len(table) >= _ATTEMPTS_MAX and key not in table:
        for stale in list(table)[: _ATTEMPTS_MAX // 2]:
            del table[stale]
    table[key] = value


def _same_commit(old: PreparedCommit, new: PreparedCommit) -> bool:
    """Whether ``new`` writes exactly what ``old`` wrote, from the same version (the clock
    reading, the token and the fence aside: the fields before ``committed_at``, and
    ``priority``)."""
    return (
        old[1] == new[1]  # expected_version first: on the hot path, it differs
        and old[:_COMMITTED_AT] == new[:_COMMITTED_AT]
        and old.priority == new.priority
    )


StoredEntry = tuple[weakref.ref[Execution], int, str, tuple[Any, ...]]
"""An entry of :data:`_stored`: the object's weak reference, the version and token its last
successful commit stored, and that commit's summary columns."""

_stored: dict[int, StoredEntry] = {}
"""Per live ``Execution`` object (by identity): the version, token and summary columns of its
last successful commit — the :attr:`PreparedCommit.base` (and
:attr:`~PreparedCommit.summary_stored`) of its next commit from that version.  An entry goes
when its object does (the weak reference's callback), so it needs no bound."""


def _forget(key: int) -> Callable[[weakref.ref[Execution]], None]:
    def forget(ref: weakref.ref[Execution]) -> None:
        entry = _stored.get(key)
        if entry is not None and entry[0] is ref:
            del _stored[key]

    return forget


def stored_as(exe: Execution, prepared: PreparedCommit) -> None:
    """Record that ``prepared`` was stored for ``exe`` (call after a successful commit): the
    next commit of this very object from ``prepared.new_version`` carries its token as the
    fence (:attr:`PreparedCommit.base`)."""
    key = id(exe)
    entry = _stored.get(key)
    ref = entry[0] if entry is not None and entry[0]() is exe else weakref.ref(exe, _forget(key))
    new_version, token, summary = prepared[_NEW_VERSION], prepared[_TOKEN], prepared[_SUMMARY]
    _stored[key] = (ref, new_version, token, summary)  # type: ignore[assignment]


def _base_of(exe: Execution, expected_version: int) -> StoredEntry | None:
    """This object's :data:`_stored` entry when its last successful commit stored
    ``expected_version`` (so its token fences the next update), else ``None``."""
    stored = _stored.get(id(exe))
    if stored is None or stored[1] != expected_version or stored[0]() is not exe:
        return None
    return stored


def _fence(stored: StoredEntry | None, summary: tuple[Any, ...]) -> tuple[str | None, bool]:
    """A commit's :attr:`~PreparedCommit.base` and :attr:`~PreparedCommit.summary_stored`
    from this object's :data:`_stored` entry for its expected version (:func:`_base_of`) and
    the summary columns it writes."""
    if stored is None:
        return None, False
    return stored[2], stored[3] == summary


def _resend_of(exe: Execution, prepared: PreparedCommit) -> PreparedCommit:
    """``prepared`` recorded as this object's latest attempt; when the previous attempt was
    the very same commit (a re-send), with that attempt's token and fence instead (callers
    hold ``_attempts_lock``)."""
    key = id(exe)
    entry = _attempts.get(key)
    if entry is None:  # _remember, inlined: a new key may need room
        ref = weakref.ref(exe)
        if len(_attempts) >= _ATTEMPTS_MAX:
            _remember(_attempts, key, (ref, prepared))
            return prepared
    elif entry[0]() is exe:
        ref, last = entry
        if _same_commit(last, prepared):  # a re-send: the very same commit
            prepared = prepared._replace(
                token=last.token, base=last.base, summary_stored=last.summary_stored
            )
    else:  # another object that had the same id
        ref = weakref.ref(exe)
    _attempts[key] = (ref, prepared)
    return prepared


_unsettled: dict[str, None] = {}
"""Tokens of commits that raised ``CommitOutcomeUnknown`` in this process and have not been
settled by a ``StoreConflict`` since (bounded like the attempts)."""


def outcome_error(prepared: PreparedCommit, error: BaseException) -> BaseException:
    """The error a failed commit raises, so a re-send never misstates the outcome: a
    ``CommitOutcomeUnknown`` is remembered (by token); a plain ``StoreUnavailable`` of a re-send
    whose earlier attempt's outcome is unknown becomes ``CommitOutcomeUnknown`` again (this
    attempt wrote nothing, the earlier one may have); a ``StoreConflict`` settles the token."""
    token = prepared.token
    if not token or not isinstance(error, StoreError):
        return error
    with _attempts_lock:
        if isinstance(error, CommitOutcomeUnknown):
            _remember(_unsettled, token, None)
            return error
        if isinstance(error, StoreConflict):
            _unsettled.pop(token, None)
            return error
        if not isinstance(error, StoreUnavailable) or token not in _unsettled:
            return error
    unknown = CommitOutcomeUnknown(
        prepared.execution_id,
        prepared.expected_version,
        f"an earlier attempt of this commit may be stored and this one did not reach the "
        f"server to settle it: {error}",
    )
    unknown.__cause__ = error
    return unknown


def resent_and_stored(prepared: PreparedCommit, found: int | None, receipt: str | None) -> bool:
    """Whether a commit whose CAS missed was already stored: the stored version is at least
    the one it writes and ``receipt`` (the stored token of ``prepared.new_version``, ``None``
    when the store no longer holds it) is its token."""
    return (
        found is not None
        and found >= prepared.new_version
        and receipt is not None
        and bool(prepared.token)
        and receipt == prepared.token
    )


def receipt_slot(version: int) -> int:
    """The slot, in ``range(RECEIPT_WINDOW)``, that holds the receipt of ``version`` in a
    fixed-size ring (slot = version modulo the window)."""
    return version % RECEIPT_WINDOW


def _bump_and_prepare(exe: Execution, args: CommitArgs, max_document_bytes: int) -> PreparedCommit:
    """Bump ``exe.version`` and validate and encode the commit (nothing is written by anyone
    before every refusal: ``TypeError``, ``InvalidIdentifier``, ``InvalidPayload``,
    ``PayloadTooLarge``); any exception restores the old version.  :func:`committing`'s first
    half."""
    if not isinstance(exe, Execution):
        raise TypeError(f"commit() needs an Execution, got {type(exe).__name__}")
    old = exe.version
    if type(old) is not int or not 0 <= old < MAX_INT:  # a bool's type is not int
        raise ValueError(f"execution version must be an int in [0, {MAX_INT - 1}], got {old!r}")
    exe.version = old + 1
    try:
        # a fresh token and this object's fence, replaced by the previous attempt's only for
        # a re-send of the same commit (same object, version and arguments)
        stored = _base_of(exe, old)
        prepared = _prepare(exe, old, args, max_document_bytes, os.urandom(16).hex(), stored)
        with _attempts_lock:
            return _resend_of(exe, prepared)
    except BaseException:
        exe.version = old
        raise


class Committing:
    """The context manager :func:`committing` returns (a class: cheaper than a generator-based
    ``@contextmanager`` on every commit, with the same behaviour).

    ``__enter__`` bumps ``exe.version`` and returns the :class:`PreparedCommit`; any exception,
    raised while preparing or inside the ``with`` block (``CancelledError`` included), restores
    the old version and propagates.
    """

    __slots__ = ("_args", "_exe", "_limit", "_old", "_prepared")

    def __init__(
        self,
        exe: Execution,
        args: CommitArgs,
        max_document_bytes: int,
    ) -> None:
        self._exe = exe
        self._args = args
        self._limit = max_document_bytes
        self._old = 0
        self._prepared: PreparedCommit | None = None

    def __enter__(self) -> PreparedCommit:
        prepared = _bump_and_prepare(self._exe, self._args, self._limit)
        self._old = prepared.expected_version
        self._prepared = prepared
        return prepared

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            if self._prepared is not None and self._exe.version == self._prepared.new_version:
                stored_as(self._exe, self._prepared)
        else:
            self._exe.version = self._old
            if self._prepared is not None and isinstance(exc, StoreError):
                error = outcome_error(self._prepared, exc)
                if error is not exc:
                    raise error


def committing(
    exe: Execution,
    emits: Sequence[Emit] = (),
    processed_event_id: str | None = None,
    timers: Sequence[TimerOp] = (),
    spawns: Sequence[Spawn] = (),
    trace: dict[str, Any] | None = None,
    *,
    max_document_bytes: int = MAX_DOCUMENT_BYTES,
) -> Committing:
    """Bump ``exe.version``, yield the prepared commit, restore the version on any exception.

    ``max_document_bytes`` is the backend's per-document limit (at most, and by default,
    :data:`~harel.store.common.limits.MAX_DOCUMENT_BYTES`).  Nothing happens until the
    ``with`` statement enters.
    """
    return Committing(exe, (emits, processed_event_id, timers, spawns, trace), max_document_bytes)
