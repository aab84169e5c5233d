"""The read-only pages: the executions list, one execution, the dead letters, the leases."""

from __future__ import annotations

import time
from typing import Any

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from harel.engine.deadletters import DEAD_LETTERS_ID, letters_of, requeue_refusal
from harel.engine.definition import Definition
from harel.model import Execution
from harel.monitor.access import unsealed_notice
from harel.monitor.chart import render_svg
from harel.monitor.context import monitor_of
from harel.monitor.errors import LOGGER, PageError
from harel.monitor.formatting import path_id
from harel.monitor.leases import LeaseQuery, leases_fingerprint
from harel.monitor.listing import ListingQuery
from harel.monitor.live import page_fingerprint
from harel.monitor.timeline import window
from harel.store.common.urls import redact_text
from harel.store.contract import FINISHED


async def executions(request: Request) -> Response:
    """``/``: one page of executions, the filters, the counts by status, the id search."""
    monitor = monitor_of(request)
    store = monitor.reader.store
    search = request.query_params.get("q", "").strip()
    if search:
        found = await monitor.reader.run(store.load, search)
        if found is not None:
            return RedirectResponse(f"/executions/{path_id(search)}", status_code=303)
    query = ListingQuery.parse(request.query_params)
    page = await monitor.reader.run(query.fetch, store)
    counts = await monitor.reader.counts(query.definition_id, query.roots_only)
    next_url = None
    if page.next_cursor is not None:
        next_url = "/?" + query.query_string(cursor=page.next_cursor)
    return monitor.render(
        request,
        "executions.html",
        {
            "query": query,
            "page": page,
            "counts": counts,
            "next_url": next_url,
            "first_url": "/?" + query.query_string() if query.cursor else None,
            "not_found": search or None,
            "notice": unsealed_notice(request, monitor.settings.csrf),
            "poll_url": "/api/summary?" + query.query_string(cursor=query.cursor),
            "fingerprint": page_fingerprint(page),
        },
    )


def _active(exe: Execution) -> list[str]:
    """The active configuration: the active path and the regions still running."""
    active = [exe.active_path] if exe.active_path else []
    return active + [child.root_path for child in exe.children.values() if not child.finished]


def _chart(definition: Definition | None, exe: Execution) -> Markup | str | None:
    """The statechart as SVG (already escaped by its renderer), a note when it failed, or
    ``None`` when the monitor has no definition for it."""
    if definition is None:
        return None
    try:
        return Markup(render_svg(definition, _active(exe)))
    except Exception as exc:
        LOGGER.warning("harel monitor: chart of %r failed: %s", exe.definition_id, exc)
        return redact_text(f"the chart could not be drawn ({type(exc).__name__}: {exc})")


def _before(request: Request) -> int | None:
    text = request.query_params.get("before", "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise PageError(400, "Bad trace position", "before must be a trace index") from None


async def execution(request: Request) -> Response:
    """``/executions/{id}``: everything the store holds for one execution, from one read."""
    monitor = monitor_of(request)
    execution_id: str = request.path_params["execution_id"]
    before = _before(request)
    record = await monitor.reader.run(monitor.reader.store.export_execution, execution_id)
    if record is None or record.execution is None:
        raise PageError(404, "Not found", f"no execution with id {execution_id!r} is stored")
    exe = record.execution
    timers = {**exe.armed_timers, **dict(record.timers)}
    definition = monitor.settings.definitions.get(exe.definition_id)
    context: dict[str, Any] = {
        "exe": exe,
        "record": record,
        "active": _active(exe),
        "timers": sorted(timers.items(), key=lambda item: (item[1], item[0])),
        "timeline": window(record.trace, before=before),
        "chart": _chart(definition, exe),
        "can_send": monitor.settings.allow_writes and definition is not None,
        "can_purge": monitor.settings.allow_writes and exe.status in FINISHED,
        "notice": unsealed_notice(request, monitor.settings.csrf),
        "poll_url": f"/api/version/{path_id(exe.id)}",
        "fingerprint": str(exe.version),
    }
    return monitor.render(request, "execution.html", context)


async def dead_letters(request: Request) -> Response:
    """``/dead-letters``: what ``harel dead-letters`` lists; with ``--allow-writes`` each
    requeueable letter has a requeue button."""
    monitor = monitor_of(request)
    record = await monitor.reader.run(monitor.reader.store.load, DEAD_LETTERS_ID)
    letters, total = letters_of(record)
    requeueable = {letter.ref for letter in letters if requeue_refusal(letter) is None}
    context: dict[str, Any] = {
        "letters": letters,
        "total": total,
        "dropped": total - len(letters),
        "requeueable": requeueable if monitor.settings.allow_writes else set(),
        "notice": unsealed_notice(request, monitor.settings.csrf),
    }
    return monitor.render(request, "dead_letters.html", context)


async def leases(request: Request) -> Response:
    """``/leases``: which worker holds which lease and until when (one bounded read)."""
    monitor = monitor_of(request)
    query = LeaseQuery.parse(request.query_params)
    now = time.time()
    held = await monitor.reader.run(query.fetch, monitor.reader.store, now)
    suffix = query.query_string()
    return monitor.render(
        request,
        "leases.html",
        {
            "leases": held,
            "now": now,
            "query": query,
            "poll_url": "/api/leases" + (f"?{suffix}" if suffix else ""),
            "fingerprint": leases_fingerprint(held),
        },
    )
