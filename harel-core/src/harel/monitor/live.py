"""The polled JSON endpoints: one cheap store read per request.

A page polls one of them every 2 s (10 s while its tab is hidden, see ``static/monitor.js``)
and reloads when the answer's fingerprint differs from the one it was rendered with.
"""

from __future__ import annotations

import hashlib
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from harel.model import ExecutionPage
from harel.monitor.context import monitor_of
from harel.monitor.leases import LeaseQuery, leases_fingerprint
from harel.monitor.listing import ListingQuery


def page_fingerprint(page: ExecutionPage) -> str:
    """A digest of what a list page shows (ids, versions, statuses, next cursor)."""
    digest = hashlib.sha256()
    for item in page.items:
        digest.update(f"{item.id}\0{item.version}\0{item.status.value}\0".encode())
    digest.update((page.next_cursor or "").encode())
    return digest.hexdigest()[:16]


async def summary(request: Request) -> Response:
    """``/api/summary?<list filters>``: the fingerprint of that list page."""
    monitor = monitor_of(request)
    query = ListingQuery.parse(request.query_params)
    page = await monitor.reader.run(query.fetch, monitor.reader.store)
    return JSONResponse({"fingerprint": page_fingerprint(page), "items": len(page.items)})


async def version(request: Request) -> Response:
    """``/api/version/{id}``: the execution's version and status (404 when not stored)."""
    monitor = monitor_of(request)
    execution_id: str = request.path_params["execution_id"]
    exe = await monitor.reader.run(monitor.reader.store.load, execution_id)
    if exe is None:
        return JSONResponse({"error": "not found", "fingerprint": ""}, status_code=404)
    return JSONResponse(
        {"fingerprint": str(exe.version), "version": exe.version, "status": exe.status.value}
    )


async def leases(request: Request) -> Response:
    """``/api/leases?limit=N``: the fingerprint of the leases page and how many it shows."""
    monitor = monitor_of(request)
    query = LeaseQuery.parse(request.query_params)
    held = await monitor.reader.run(query.fetch, monitor.reader.store, time.time())
    return JSONResponse(
        {"fingerprint": leases_fingerprint(held), "leases": None if held is None else len(held)}
    )
