"""How the SQL family's requests travel over rqlite's HTTP API (sans-IO: no socket, no httpx).

:meth:`Wire.run` turns one request of the shared plan into HTTP calls and the replies back into
:class:`~harel.store.common.sql.Result` values.  It is a generator: it yields
:class:`HttpCall` values and is sent :class:`HttpReply` values, so the sync and async drivers
share it whole (they only send calls).  Routing:

=================================  ===========================================================
plan request                       HTTP call
=================================  ===========================================================
a read ``Statement`` (``SELECT``)  ``POST /db/query?level=L``  ``[[sql, p1, ...]]``
a write ``Statement``              ``POST /db/execute``  ``[[sql, p1, ...]]``
a ``Batch`` of writes              ``POST /db/execute?transaction``  (all applied or none)
a ``Batch`` holding reads          ``POST /db/request?transaction&level=L`` (the unified
                                   endpoint: a commit's CAS, side writes and found version),
                                   led by the schema tripwire (below)
:data:`READY`                      ``GET /readyz`` (200: ready; 503: no leader yet; 404: a
                                   server without the endpoint, taken as ready; 401/403: a
                                   user without the ``ready`` permission, taken as ready — the
                                   schema probe that follows needs a leader anyway); returns
                                   the node's ``X-RQLITE-VERSION``
:data:`VERIFY`                     ``POST /db/query?transaction``: ``EXPLAIN`` of every
                                   statement the plan sends (each must prepare) and the schema
                                   cookie, read in one snapshot
=================================  ===========================================================

**All-or-nothing on a real node.**  rqlite's unified endpoint does not stop at a statement that
fails to *prepare* (no such table or column, a syntax error): it reports that statement's error,
runs the rest and commits.  So the open sequence ends with :data:`VERIFY` (every statement
prepares on this database, or ``StoreCorrupted`` before anything is written), and every
``/db/request`` transaction starts with a tripwire, ``SELECT CASE WHEN schema_version = ?
THEN 0 ELSE abs(-9223372036854775808) END FROM pragma_schema_version()``: if the schema changed
since it was verified (a table dropped or altered behind the store's back, a ``VACUUM``), the
tripwire fails *while running* — which rolls the whole transaction back — and the wire
re-verifies once and re-sends the (certainly unapplied) request, or raises ``StoreCorrupted``.

**BLOB-shaped strings.**  rqlite 8.31+ binds a string parameter shaped like a BLOB literal
(``X'…'``, surrounding whitespace ignored) as a BLOB.  Such a value is sent as two halves
joined in SQL — the placeholder becomes ``(? || ?)`` with ``x`` and ``'…'`` — so it is stored
and compared as the text it is, on every server version.

Leader redirects (301/302/307/308 with ``Location``) are followed up to ``redirects`` times,
re-sending the same method and body (never from ``https`` down to ``http``).  Any other status,
every top-level ``error`` (Raft failures arrive as HTTP 200 bodies) and every per-statement
``error`` becomes a typed error (:mod:`harel_store_rqlite._errors`); a write whose request may
have been applied raises :class:`~harel_store_rqlite._errors.OutcomeUnknown`.  Values travel
only as JSON parameters next to the statement text.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar
from urllib.parse import urljoin, urlsplit

from harel.store.author.sql import Batch, Result, Statement
from harel.store.errors import InvalidPayload, StoreConfigError, StoreUnavailable

from harel_store_rqlite._errors import (
    raft_error,
    reply_error,
    statement_error,
    status_error,
    verify_error,
)
from harel_store_rqlite._options import RqliteOptions

T = TypeVar("T")


class _Ready:
    """The request "is the node ready (up, with a leader)?" (see :data:`READY`)."""

    def __repr__(self) -> str:
        return "READY"


READY: Final = _Ready()
"""A request the open sequence yields before the schema check: ``GET /readyz``; its value is
the node's version (``X-RQLITE-VERSION``, ``None`` when absent)."""


class _Verify:
    """The request "does every statement prepare here? (and remember the schema cookie)"."""

    def __repr__(self) -> str:
        return "VERIFY"


VERIFY: Final = _Verify()
"""The last request of the open sequence (see the module docstring)."""

Request = Statement | Batch | _Ready | _Verify
REDIRECTS = frozenset({301, 302, 307, 308})
JSON_HEADERS: Final = {"Content-Type": "application/json"}
VERSION_HEADER: Final = "x-rqlite-version"
COOKIE_SQL: Final = "SELECT schema_version FROM pragma_schema_version()"
TRIPWIRE_SQL: Final = (
    "SELECT CASE WHEN schema_version = ? THEN 0 ELSE abs(-9223372036854775808) END "
    "FROM pragma_schema_version()"
)
"""Fails while running (integer overflow), never while preparing, when the schema changed."""
DISARM_SQL: Final = (
    "UPDATE executions SET commit_token = NULL WHERE id = ? AND commit_token = ? AND changes() = 0"
)
"""Sent right after a batch's CAS: when the CAS changed no row although the execution holds
this request's token, the request is being applied a second time (rqlite re-forwarding it to a
new leader): clearing the token makes every side write's owner guard match nothing."""


@dataclass(frozen=True, slots=True)
class HttpCall:
    """One HTTP request to send: ``method`` to the absolute ``url`` with ``body`` (JSON bytes).

    ``write`` tells the driver that the request may change data (a failure after sending it
    leaves its outcome unknown).
    """

    method: Literal["GET", "POST"]
    url: str
    body: bytes | None = None
    write: bool = False


@dataclass(frozen=True, slots=True)
class HttpReply:
    """What came back: the status, the body and the ``Location`` header (redirects)."""

    status: int
    body: bytes
    location: str | None = None
    version: str | None = None
    """The ``X-RQLITE-VERSION`` header."""


Exchange = Generator[HttpCall, HttpReply, T]
"""A sans-IO HTTP exchange: yields calls, is sent their replies, returns ``T``."""


def is_read(statement: Statement) -> bool:
    """Whether a plan statement only reads (all of the shared reads start with ``SELECT``)."""
    return statement.sql.lstrip()[:6].upper() == "SELECT"


def blob_shaped(value: str) -> bool:
    """Whether rqlite 8.31+ could bind ``value`` as a BLOB (``x'…'`` / ``X'…'`` after
    whitespace; a superset of rqlite's ``ParseHex``: splitting such a value is harmless)."""
    head = value.lstrip()[:2]
    return (head == "x'" or head == "X'") and value.rstrip()[-1:] == "'"


def shielded(statement: Statement) -> tuple[str, list[Any]]:
    """The statement's text and parameters with every BLOB-shaped string parameter sent as two
    halves joined in SQL (``(? || ?)``: neither half is BLOB-shaped, the join is the text)."""
    params = statement.params
    hits = [n for n, v in enumerate(params) if type(v) is str and blob_shaped(v)]
    if not hits:
        return statement.sql, list(params)
    pieces = statement.sql.split("?")
    if len(pieces) != len(params) + 1:
        raise InvalidPayload(
            f"a value shaped like a BLOB literal ({params[hits[0]][:40]!r}) cannot be sent to "
            "rqlite in this statement"
        )
    sql, values = [pieces[0]], []
    for n, value in enumerate(params):
        if n in hits:
            cut = len(value) - len(value.lstrip()) + 1  # just after the x
            sql.append("(? || ?)")
            values += [value[:cut], value[cut:]]
        else:
            sql.append("?")
            values.append(value)
        sql.append(pieces[n + 1])
    return "".join(sql), values


class Wire:
    """rqlite's HTTP API for one node (options give the base URL, levels and redirects).

    ``verified`` lists the statement texts (with their parameter counts) that :data:`VERIFY`
    checks; the schema cookie it reads is kept here for the tripwire.
    """

    def __init__(
        self,
        options: RqliteOptions,
        verified: Sequence[tuple[str, int]] = (),
        cas_forms: Mapping[str, tuple[int, int]] | None = None,
    ) -> None:
        self.options = options
        self.base = options.base_url
        self.verified = tuple(verified)
        self.cas_forms = dict(cas_forms or {})
        """CAS statement text -> positions of its ``id`` and owner ``token`` parameters: a
        batch led by one gets :data:`DISARM_SQL` right after it."""
        self.cookie: int | None = None
        """The schema cookie read by the last :data:`VERIFY` (``None``: not verified)."""

    def run(self, request: Request, level: str | None = None) -> Exchange[Any]:
        """Send ``request`` (reads at consistency ``level``, default: the ``level`` knob); a
        :class:`Result` for a statement, a list of them for a batch, ``None`` for
        :data:`READY`."""
        level = level or self.options.level
        if isinstance(request, _Ready):
            reply = yield from self._follow(HttpCall("GET", f"{self.base}/readyz"))
            if reply.status not in (200, 401, 403, 404):
                raise status_error(reply.status, reply.body, self.options)
            return reply.version
        if isinstance(request, _Verify):
            yield from self._verify(level)
            return None
        if isinstance(request, Statement):
            statements: Sequence[Statement] = (request,)
            read = is_read(request)
            path = f"/db/query?level={level}" if read else "/db/execute"
        else:
            statements, disarmed = self._disarmed(request.statements)
            read = any(is_read(statement) for statement in statements)
            if read:
                results = yield from self._unified(statements, level)
            else:
                results = yield from self._post("/db/execute?transaction", statements, True)
            return [results[0], *results[2:]] if disarmed else results
        results = yield from self._post(path, statements, not read)
        return results[0]

    def _disarmed(self, statements: Sequence[Statement]) -> tuple[Sequence[Statement], bool]:
        """``statements`` with :data:`DISARM_SQL` after a leading CAS, and whether it was
        added."""
        positions = self.cas_forms.get(statements[0].sql) if statements else None
        if positions is None:
            return statements, False
        cas = statements[0]
        disarm = Statement(DISARM_SQL, (cas.params[positions[0]], cas.params[positions[1]]))
        return (cas, disarm, *statements[1:]), True

    def _post(
        self, path: str, statements: Sequence[Statement], write: bool
    ) -> Exchange[list[Result]]:
        """POST ``statements`` to ``path``; their results (every error raised, typed)."""
        call = HttpCall("POST", self.base + path, self._body(statements), write)
        reply = yield from self._follow(call)
        if reply.status != 200:
            raise status_error(reply.status, reply.body, self.options, write=write)
        return self._results(reply.body, statements, write=write)

    def _unified(self, statements: Sequence[Statement], level: str) -> Exchange[list[Result]]:
        """A ``/db/request`` transaction led by the tripwire; re-verified and re-sent once
        when the tripwire finds the schema changed (nothing was applied then)."""
        path = f"/db/request?transaction&level={level}"
        if self.cookie is None:  # not verified (a harness's unopened store): no tripwire
            return (yield from self._post(path, statements, True))
        for attempt in range(2):
            tripwire = Statement(TRIPWIRE_SQL, (self.cookie,))
            try:
                results = yield from self._post(path, (tripwire, *statements), True)
            except _Tripped:
                if attempt:
                    break
                yield from self._verify(level)
                continue
            return results[1:]
        raise StoreUnavailable(
            f"the schema of {self.options.where} changed twice while one request was sent "
            "(nothing was applied); retry"
        )

    def _verify(self, level: str) -> Exchange[None]:
        """Check that every statement of :attr:`verified` (and the tripwire) prepares here,
        and read the schema cookie, in one snapshot."""
        explained = [
            Statement(f"EXPLAIN {sql}", (None,) * slots)
            for sql, slots in (*self.verified, (TRIPWIRE_SQL, 1))
        ]
        statements = (*explained, Statement(COOKIE_SQL))
        path = f"/db/query?transaction&level={level}"
        call = HttpCall("POST", self.base + path, self._body(statements))
        reply = yield from self._follow(call)
        if reply.status != 200:
            raise status_error(reply.status, reply.body, self.options)
        document = self._document(reply.body)
        if "error" in document:
            raise raft_error(document["error"], self.options, write=False)
        results = document.get("results")
        if not isinstance(results, list):
            raise reply_error("no results array", self.options)
        checked = (*self.verified, (TRIPWIRE_SQL, 1))
        for (sql, _), result in zip(checked, results, strict=False):
            if not isinstance(result, dict) or "error" in result:
                detail = result.get("error") if isinstance(result, dict) else result
                raise verify_error(sql, detail, self.options)
        if len(results) != len(statements):
            raise reply_error(
                f"{len(results)} results for {len(statements)} statements", self.options
            )
        try:
            self.cookie = int(results[-1]["values"][0][0])
        except (KeyError, IndexError, TypeError, ValueError):
            raise reply_error("no schema_version", self.options) from None

    def _follow(self, call: HttpCall) -> Exchange[HttpReply]:
        """Send ``call``, following leader redirects."""
        for _ in range(self.options.redirects + 1):
            reply = yield call
            if reply.status not in REDIRECTS or not reply.location:
                return reply
            target = urljoin(call.url, reply.location)
            if urlsplit(call.url).scheme == "https" and urlsplit(target).scheme != "https":
                raise StoreConfigError(
                    f"{self.options.where} redirected an HTTPS request to a plain-HTTP leader; "
                    "configure every node of the cluster with TLS"
                )
            call = HttpCall(call.method, target, call.body, call.write)
        raise StoreUnavailable(
            f"{self.options.where} redirected a request more than {self.options.redirects} "
            "times (a leader election in progress?); retry, or raise the redirects knob"
        )

    def _body(self, statements: Sequence[Statement]) -> bytes:
        """The JSON array ``[[sql, p1, ...], ...]`` (BLOB-shaped strings :func:`shielded`)."""
        items = []
        for statement in statements:
            sql, params = shielded(statement)
            items.append([sql, *params])
        try:
            text = json.dumps(
                items,
                ensure_ascii=False,
                allow_nan=False,
                separators=(",", ":"),
            )
            return text.encode("utf-8")
        except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
            raise InvalidPayload(
                f"a value cannot be sent to rqlite as JSON ({exc}); pass finite numbers and "
                "well-formed str values"
            ) from None

    def _document(self, body: bytes) -> dict[str, Any]:
        """The reply's JSON object."""
        try:
            document = json.loads(body)
        except ValueError:
            raise reply_error("not JSON", self.options) from None
        if not isinstance(document, dict):
            raise reply_error("not a JSON object", self.options)
        return document

    def _results(
        self, body: bytes, statements: Sequence[Statement], *, write: bool = False
    ) -> list[Result]:
        """Decode ``{"results": [...]}``; raise the top-level error (a Raft failure) or the
        first per-statement error (the tripwire's as :class:`_Tripped`)."""
        document = self._document(body)
        if "error" in document:
            raise raft_error(document["error"], self.options, write=write)
        results = document.get("results")
        if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
            raise reply_error("no results array", self.options)
        led = bool(statements) and statements[0].sql == TRIPWIRE_SQL
        for index, result in enumerate(results):
            if "error" in result:
                if led and index == 0:
                    raise _Tripped()
                raise statement_error(index - led, result["error"], self.options)
        if len(results) != len(statements):
            raise reply_error(
                f"{len(results)} results for {len(statements)} statements", self.options
            )
        try:
            return [
                Result(
                    rows=r.get("values") or (),
                    rowcount=int(r.get("rows_affected", 0)),
                    last_id=None if r.get("last_insert_id") is None else int(r["last_insert_id"]),
                )
                for r in results
            ]
        except (TypeError, ValueError):
            raise reply_error("a malformed rows_affected or last_insert_id", self.options) from None


class _Tripped(Exception):
    """The tripwire failed: the schema changed since it was verified (nothing was applied)."""
