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
                                   endpoint: a commit's CAS, side writes and found version)
:data:`READY`                      ``GET /readyz`` (200: ready; 503: no leader yet; 404: a
                                   server without the endpoint, taken as ready)
=================================  ===========================================================

Leader redirects (301/302/307/308 with ``Location``) are followed up to ``redirects`` times,
re-sending the same method and body (never from ``https`` down to ``http``).  Any other status
and every per-statement ``error`` becomes a typed error (:mod:`harel_store_rqlite._errors`).
Values travel only as JSON parameters next to the statement text.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar
from urllib.parse import urljoin, urlsplit

from harel.store.common.sql import Batch, Result, Statement
from harel.store.errors import InvalidPayload, StoreConfigError, StoreUnavailable

from harel_store_rqlite._errors import reply_error, statement_error, status_error
from harel_store_rqlite._options import RqliteOptions

T = TypeVar("T")


class _Ready:
    """The request "is the node ready (up, with a leader)?" (see :data:`READY`)."""

    def __repr__(self) -> str:
        return "READY"


READY: Final = _Ready()
"""A request the open sequence yields before the schema check: ``GET /readyz``."""

Request = Statement | Batch | _Ready
REDIRECTS = frozenset({301, 302, 307, 308})
JSON_HEADERS: Final = {"Content-Type": "application/json"}


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


Exchange = Generator[HttpCall, HttpReply, T]
"""A sans-IO HTTP exchange: yields calls, is sent their replies, returns ``T``."""


def is_read(statement: Statement) -> bool:
    """Whether a plan statement only reads (all of the shared reads start with ``SELECT``)."""
    return statement.sql.lstrip()[:6].upper() == "SELECT"


class Wire:
    """rqlite's HTTP API for one node (options give the base URL, levels and redirects)."""

    def __init__(self, options: RqliteOptions) -> None:
        self.options = options
        self.base = options.base_url

    def run(self, request: Request, level: str | None = None) -> Exchange[Any]:
        """Send ``request`` (reads at consistency ``level``, default: the ``level`` knob); a
        :class:`Result` for a statement, a list of them for a batch, ``None`` for
        :data:`READY`."""
        level = level or self.options.level
        if isinstance(request, _Ready):
            reply = yield from self._follow(HttpCall("GET", f"{self.base}/readyz"))
            if reply.status not in (200, 404):
                raise status_error(reply.status, reply.body, self.options)
            return None
        if isinstance(request, Statement):
            statements: Sequence[Statement] = (request,)
            read = is_read(request)
            path = f"/db/query?level={level}" if read else "/db/execute"
        else:
            statements = request.statements
            read = any(is_read(statement) for statement in statements)
            path = f"/db/request?transaction&level={level}" if read else "/db/execute?transaction"
        write = not (isinstance(request, Statement) and read)
        call = HttpCall("POST", self.base + path, self._body(statements), write)
        reply = yield from self._follow(call)
        if reply.status != 200:
            raise status_error(reply.status, reply.body, self.options)
        results = self._results(reply.body, statements)
        return results[0] if isinstance(request, Statement) else results

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
        """The JSON array ``[[sql, p1, ...], ...]``."""
        try:
            text = json.dumps(
                [[s.sql, *s.params] for s in statements],
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

    def _results(self, body: bytes, statements: Sequence[Statement]) -> list[Result]:
        """Decode ``{"results": [...]}``; raise the first per-statement error."""
        try:
            document = json.loads(body)
        except ValueError:
            raise reply_error("not JSON", self.options) from None
        if not isinstance(document, dict):
            raise reply_error("not a JSON object", self.options)
        if "error" in document:
            raise statement_error(0, document["error"], self.options)
        results = document.get("results")
        if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
            raise reply_error("no results array", self.options)
        for index, result in enumerate(results):
            if "error" in result:
                raise statement_error(index, result["error"], self.options)
        if len(results) != len(statements):
            raise reply_error(
                f"{len(results)} results for {len(statements)} statements", self.options
            )
        try:
            return [
                Result(rows=r.get("values") or (), rowcount=int(r.get("rows_affected", 0)))
                for r in results
            ]
        except (TypeError, ValueError):
            raise reply_error("a malformed rows_affected", self.options) from None
