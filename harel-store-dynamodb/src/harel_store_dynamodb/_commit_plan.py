"""The commit plan: send one commit until its outcome is KNOWN, and report exactly that.

Guarantee: a commit that returns was stored once; a commit that raises ``StoreConflict`` or
``StoreUnavailable`` was not stored (and cannot land later).  The hazards are answers that do
not say what happened: a timeout or a lost connection (the request may still be applied, even
after the client gave up), and botocore's own retries (an earlier send of the same request may
have landed, so the answer to the last send — "condition failed" — describes our own write).

How it is settled:

* the commit's receipt is its core commit token (``PreparedCommit.token``, reused when the
  caller re-sends the same commit after :class:`~harel.store.errors.CommitOutcomeUnknown`),
  stored as the receipt of the version it writes (``k<version % RECEIPTS>`` on the execution
  item, see :data:`._schema.RECEIPTS`); each attempt also gets a fresh ``ClientRequestToken``
  (a transaction's idempotency key: one per distinct request);
* an unanswered attempt is sent again, the same request with the same tokens (DynamoDB itself
  answers a duplicate transaction as the original).  The resend is conditional like the
  original, so once it is answered nothing of this attempt can land any more: either the
  resend was applied, or the item moved on;
* the transaction decides the dedupe and the fence itself, with no read before it: the mark's
  ``Put`` is guarded by ``attribute_not_exists`` and an update's condition holds the fence
  (the receipt of ``expected_version`` is :attr:`PreparedCommit.base`, when set);
* a refused attempt (condition failed) reads the stored item returned with the refusal
  (``ALL_OLD``, same round trip): if the receipt of the version this commit writes holds its
  token, the commit landed — in this call or in an earlier call that re-sends now — and it
  returns without writing again; otherwise, when the mark's action failed too (its
  cancellation reason, same answer), it is :class:`~harel.store.errors.AlreadyProcessed`, else
  a conflict (or a moved trace cursor: retry).  A refusal by the mark alone (the execution's
  condition held) is ``AlreadyProcessed`` at once: the re-send of a stored commit would have
  failed the execution's condition.  When more than ``RECEIPTS - 1`` commits landed since
  and an earlier send is in doubt, the outcome cannot be told:
  :class:`~harel.store.errors.CommitOutcomeUnknown` says so (never a conflict that may be
  false);
* answers that are definite refusals write nothing and are never resent as doubts: a missing
  table (:class:`._requests.TableNotFound`, at once) and a busy item
  (``TransactionConflictException``, throttling without a hidden retry: a fresh attempt after
  a backoff, at most ``ATTEMPTS``, then ``StoreUnavailable``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harel.store.author import (
    PreparedCommit,
    already_processed,
    base_holds,
    conflict,
    refuse_lost,
    work_touches,
)
from harel.store.errors import CommitOutcomeUnknown, StoreConflict, StoreError, StoreUnavailable

from harel_store_dynamodb._commit import CommitWrite, build_commit
from harel_store_dynamodb._cursor import NEW_EXECUTION, CursorCache, TraceCursor, cursor_of
from harel_store_dynamodb._requests import (
    Call,
    ConditionFailed,
    ItemBusy,
    TableNotFound,
    TransactionCancelled,
)
from harel_store_dynamodb._schema import RECEIPTS, exe_key, mark_key, receipt_attribute
from harel_store_dynamodb._seq import BaseClock
from harel_store_dynamodb._support import ATTEMPTS, BUSY_CODES, Plan, backoff, cancellation_error
from harel_store_dynamodb._values import Expr, Item, opt_str
from harel_store_dynamodb._work import StoredWork, WorkHints, split_touches, touch_action

RESENDS = 8
"""How many times one unanswered attempt is sent again before its outcome is declared unknown."""
WORK_MOVED = "work moved"
"""What a refused attempt returns when only work rows had moved since this store saw them."""
STALE_MARK = "stale mark"
"""What a refused insert returns when only its mark's guard failed: the execution is absent,
so the mark was left by one whose purge (or import) did not finish; the insert overwrites it."""
CONDITION_FAILED = "ConditionalCheckFailed"


def new_token() -> str:
    """A fresh token (128 random bits, 32 hex digits; also a valid ``ClientRequestToken``)."""
    return uuid.uuid4().hex


def landed(item: Item, commit: PreparedCommit, tokens: Iterable[str]) -> bool | None:
    """Whether the stored ``item`` shows one of ``tokens`` wrote ``commit.new_version``.

    ``None`` when it cannot tell: the receipt of that version was overwritten since.
    """
    version = int(item.get("v", {}).get("N", "0"))
    if version < commit.new_version:
        return False
    if opt_str(item, receipt_attribute(commit.new_version)) in set(tokens):
        return True
    return False if version - commit.new_version < RECEIPTS else None


@dataclass
class CommitPlan:
    """One commit's plan (see the module doc); ``run`` is the generator a driver drives."""

    table: str
    cache: CursorCache
    clock: BaseClock
    commit: PreparedCommit
    trace_max: int | None
    shards: int = 1
    """The table's index shard count (:func:`._schema.shard_of`)."""
    work: WorkHints = field(default_factory=WorkHints)
    """The work rows this store last saw (the commit's touches are built from them)."""
    tokens: list[str] = field(default_factory=list)
    """The receipt tokens this commit may have written (any of them in the receipt: it landed)."""
    doubt: bool = False
    """Some send of this commit got no clear answer (it may have landed)."""
    stored: TraceCursor | None = None
    """The cursor of the stored item when a refusal showed the commit had already landed."""
    guard_mark: bool = True
    """Whether the dedupe mark's ``Put`` is guarded (cleared once an insert found a stale
    mark of an absent execution in its way)."""

    def run(self) -> Plan:
        """Write the commit (module doc): returns ``None`` once stored, else raises."""
        commit = self.commit
        receipt = commit.token or new_token()
        self.tokens.append(receipt)
        cursor: TraceCursor | None = yield from self._cursor()
        if self.stored is not None:
            return  # the cursor read showed this very commit stored (a caller's re-send)
        changes, bundled = split_touches(work_touches(commit), commit.execution_id)
        for attempt in range(ATTEMPTS):
            touched = [
                (
                    change.key,
                    touch_action(self.table, change, self.work.get(change.key), self.shards),
                )
                for change in changes
            ]
            write = build_commit(
                self.table,
                commit,
                base=self.clock.next(),
                token=receipt,
                request_token=new_token(),
                cursor=cursor,
                trace_max=self.trace_max,
                shards=self.shards,
                work=[(key, action) for key, (action, _after) in touched],
                bundled=bundled,
                guard_mark=self.guard_mark,
            )
            outcome = yield from self._settle(write)
            if outcome is True:
                break
            if isinstance(outcome, TraceCursor):
                cursor = outcome  # only the trace cursor moved (append_trace): retry
                continue
            if outcome == WORK_MOVED:
                continue  # a work row moved since this store saw it: rebuild from the truth
            if outcome == STALE_MARK:
                self.guard_mark = False  # an insert over a dead execution's mark: overwrite it
                continue
            yield backoff(attempt)  # a relay base collision or a busy item: a fresh attempt
        else:
            raise (
                self._unknown("no attempt got a clear answer")
                if self.doubt
                else StoreUnavailable(
                    f"the commit of {commit.execution_id!r} was refused as busy or kept "
                    f"colliding after {ATTEMPTS} attempts; nothing was written; retry"
                )
            )
        self._remember_work([(key, after) for key, (_put, after) in touched])
        if self.stored is not None:
            self.cache.put(commit.execution_id, self.stored)
        elif write.after is not None and not self.doubt:
            self.cache.put(commit.execution_id, write.after)
        else:
            self.cache.drop(commit.execution_id)
        yield from delete_quietly(self.table, write.deferred_trims)

    def _remember_work(self, touched: list[tuple[str | None, StoredWork]]) -> None:
        """The touched rows as this commit wrote them (forgotten when that is not certain:
        an earlier send may have landed, and rows moved on since)."""
        for key, after in touched:
            if self.doubt or self.stored is not None:
                self.work.drop(key)
            else:
                self.work.put(key, after)

    def _unknown(self, detail: str) -> CommitOutcomeUnknown:
        commit = self.commit
        return CommitOutcomeUnknown(commit.execution_id, commit.expected_version, detail)

    def _settle(self, write: CommitWrite) -> Plan:
        """Send ``write`` until answered: ``True`` (landed), a cursor to retry with,
        :data:`WORK_MOVED` (a work row moved: rebuild), :data:`STALE_MARK` (an insert met a
        dead execution's mark: overwrite it), ``False`` (not applied: retry with a fresh
        attempt), or the typed error."""
        for resend in range(RESENDS):
            try:
                yield Call(write.operation, write.params)
                return True
            except TransactionCancelled as exc:
                self.doubt = self.doubt or exc.retried
                reasons = exc.reasons
                old = reasons[0].get("Item") if reasons else None
                return self._refused(write, exc.codes(), old, exc)
            except ConditionFailed as exc:
                self.doubt = self.doubt or exc.retried
                return self._refused(write, [CONDITION_FAILED], exc.item, exc)
            except TableNotFound:
                raise  # definite: nothing can be written to a missing table
            except ItemBusy as exc:
                if exc.retried:
                    self.doubt = True  # a hidden retry: an earlier send may have landed
                return False  # refused whole: a fresh attempt after a backoff
            except StoreUnavailable:
                # unanswered or refused after botocore's own retries (whose earlier sends may
                # have landed): send the same request again until an answer settles it
                self.doubt = True
                yield backoff(resend)
        raise self._unknown(f"{RESENDS} sends of the same request got no answer")

    def _refused(
        self, write: CommitWrite, codes: list[str], old: Item | None, exc: StoreError
    ) -> bool | TraceCursor | str:
        commit = self.commit
        mark = write.mark_action
        marked = mark is not None and codes[mark : mark + 1] == [CONDITION_FAILED]
        if codes[:1] == [CONDITION_FAILED]:
            return self._lost(old, marked)
        if marked and codes[:1] == ["None"]:
            # the execution's condition held: its version is the expected one, so this is no
            # re-send of a stored commit (that would have failed the version condition)
            if commit.is_insert:
                return STALE_MARK  # no execution item: no execution holds that mark
            raise already_processed(commit, commit.expected_version) from None
        moved = [i for i in write.work_actions if codes[i : i + 1] == [CONDITION_FAILED]]
        if moved and isinstance(exc, TransactionCancelled):
            for i in moved:
                self.work.seen_item(write.work_actions[i], exc.reasons[i].get("Item"))
            return WORK_MOVED
        if any(codes[i : i + 1] == [CONDITION_FAILED] for i in write.relay_actions):
            return False  # another process drew the same relay base: draw again
        if isinstance(exc, TransactionCancelled) and set(codes) & BUSY_CODES:
            return False
        if isinstance(exc, TransactionCancelled):
            raise cancellation_error(exc, f"the commit of {commit.execution_id!r}") from exc
        raise exc

    def _lost(self, old: Item | None, marked: bool) -> bool | TraceCursor:
        """The execution item's condition failed: ``True`` when ``old`` (its ``ALL_OLD``)
        shows this commit stored, the cursor to retry with when only the trace cursor moved,
        else the contract's error (``marked``: the mark's guard failed in the same answer)."""
        commit = self.commit
        if old is None:  # no execution item: no mark of it counts either
            raise conflict(commit, None) from None
        verdict = landed(old, commit, self.tokens)
        if verdict:
            self.stored = cursor_of(old, f"execution {commit.execution_id!r}")
            return True
        if verdict is None and self.doubt:
            raise self._unknown(
                f"more than {RECEIPTS - 1} commits landed on top of a send in doubt"
            ) from None
        found = cursor_of(old, f"execution {commit.execution_id!r}")
        self.cache.put(commit.execution_id, found)
        if (
            not marked
            and commit.trace is not None
            and not commit.is_insert
            and found.version == commit.expected_version
            and base_holds(commit, opt_str(old, receipt_attribute(commit.expected_version)))
        ):
            return found
        raise self._refusal(found.version, marked) from None

    def _refusal(self, found: int | None, marked: bool) -> StoreConflict:
        """The error of a commit that is not stored (:func:`refuse_lost`'s order, the re-send
        already ruled out)."""
        return refuse_lost(self.commit, found, None, marked) or conflict(self.commit, found)

    def _cursor(self) -> Plan:
        """The trace cursor to assume at ``commit.expected_version``.

        A hint is enough: the commit's condition checks it, and a wrong one costs a retry,
        never a wrong index.  Only a traced commit of an execution this store has never seen
        reads it first (one consistent ``GetItem``).
        """
        commit = self.commit
        if commit.is_insert:
            return NEW_EXECUTION
        cached = self.cache.get(commit.execution_id)
        if cached is not None:
            if commit.trace is not None or cached.version == commit.expected_version:
                return cached
            return None
        if commit.trace is None:
            return None
        e = Expr()
        reply = yield Call(
            "get_item",
            {
                "TableName": self.table,
                "Key": exe_key(commit.execution_id),
                "ConsistentRead": True,
                "ProjectionExpression": ", ".join(
                    e.name(a)
                    for a in (
                        "v",
                        "tn",
                        "tl",
                        receipt_attribute(commit.new_version),
                        receipt_attribute(commit.expected_version),
                    )
                ),
                **e.args(),
            },
        )
        item = reply.get("Item")
        if item is None:
            raise conflict(commit, None)
        cursor = cursor_of(item, f"execution {commit.execution_id!r}")
        self.cache.put(commit.execution_id, cursor)
        if cursor.version != commit.expected_version or not base_holds(
            commit, opt_str(item, receipt_attribute(commit.expected_version))
        ):
            if landed(item, commit, self.tokens):
                self.stored = cursor  # a re-send of a commit already stored: nothing to write
                return cursor
            marked = yield from self._marked()
            raise self._refusal(cursor.version, marked)
        return cursor

    def _marked(self) -> Plan:
        """Whether the execution holds the commit's dedupe mark (one consistent ``GetItem``;
        only on the way to a refusal, and only for a commit with an event id)."""
        event_id = self.commit.processed_event_id
        if event_id is None:
            return False
        e = Expr()
        reply = yield Call(
            "get_item",
            {
                "TableName": self.table,
                "Key": mark_key(self.commit.execution_id, event_id),
                "ConsistentRead": True,
                "ProjectionExpression": e.name("ev"),
                **e.args(),
            },
        )
        mark = reply.get("Item")
        return mark is not None and opt_str(mark, "ev") == event_id


def delete_quietly(table: str, keys: Iterable[Item]) -> Plan:
    """Best-effort deletes after a write (hidden garbage if they fail)."""
    pending: list[Any] = [{"DeleteRequest": {"Key": key}} for key in keys]
    attempt = 0
    while pending and attempt < ATTEMPTS:
        batch, pending = pending[:25], pending[25:]
        try:
            reply = yield Call("batch_write_item", {"RequestItems": {table: batch}})
        except StoreError:
            return
        unprocessed = reply.get("UnprocessedItems", {}).get(table, [])
        if unprocessed:
            pending = unprocessed + pending
            attempt += 1
            yield backoff(attempt)
