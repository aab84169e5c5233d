"""The writes, only with ``--allow-writes``: send an event, purge a finished execution,
requeue a dead letter.

Each is a POST carrying the process's CSRF secret (checked in constant time).  A POST
without ``confirm=yes`` answers with a confirmation page repeating what will be done; the
page's button posts again with ``confirm=yes``.  Without ``--allow-writes`` every write
route answers 403.  Sending goes through :func:`harel.cli.engine_cmds.deliver`, the code
path of ``harel send``; purging through the contract's ``purge`` (never forced); requeueing
through :func:`harel.engine.requeue.requeue`, the code path of ``harel dead-letters --requeue``.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from harel.cli import CommandError
from harel.cli.engine_cmds import deliver
from harel.engine.deadletters import DEAD_LETTERS_ID, find_letter, requeue_refusal
from harel.engine.requeue import LetterNotFound, RequeueError
from harel.engine.requeue import requeue as requeue_letter
from harel.model import Event
from harel.monitor.access import same_secret, sealed_notice
from harel.monitor.context import Monitor, monitor_of
from harel.monitor.errors import PageError
from harel.monitor.formatting import path_id
from harel.store.common.urls import redact_text
from harel.store.errors import ExecutionActive

NOTICES = {
    "applied": "event {kind!r} delivered",
    "duplicate": "nothing happened: event id {event_id!r} was already processed",
    "finished": "nothing happened: a finished execution takes no more events",
}


async def _checked_form(request: Request) -> tuple[Monitor, FormData]:
    """The form of an allowed write: 403 without ``--allow-writes`` or the CSRF secret."""
    monitor = monitor_of(request)
    if not monitor.settings.allow_writes:
        raise PageError(403, "Read-only monitor", "writes need harel monitor --allow-writes")
    form = await request.form()
    given = form.get("csrf")
    if not same_secret(given if isinstance(given, str) else None, monitor.settings.csrf):
        raise PageError(403, "Form expired", "reload the page and submit the form again")
    return monitor, form


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def _confirm(
    monitor: Monitor, request: Request, action: str, what: str, fields: dict[str, str]
) -> Response:
    context: dict[str, Any] = {"action": action, "what": what, "fields": fields}
    return monitor.render(request, "confirm.html", context)


async def purge(request: Request) -> Response:
    """``POST /actions/purge/{id}``: remove a finished execution and what it owns."""
    monitor, form = await _checked_form(request)
    execution_id: str = request.path_params["execution_id"]
    if _field(form, "confirm") != "yes":
        what = f"Purge execution {execution_id!r} and everything it owns (trace, marks, timers)?"
        return _confirm(monitor, request, request.url.path, what, {})
    try:
        existed = await monitor.reader.run(monitor.reader.store.purge, execution_id)
    except ExecutionActive as exc:
        raise PageError(
            409,
            "Not finished",
            f"{execution_id!r} is {exc.status}: only finished executions "
            "can be purged from the monitor (harel purge --force does it from the shell)",
        ) from None
    notice = f"{execution_id} {'purged' if existed else 'was not stored'}"
    return RedirectResponse(sealed_notice("/", notice, monitor.settings.csrf), status_code=303)


async def send(request: Request) -> Response:
    """``POST /actions/send/{id}``: deliver one event as ``harel send`` does."""
    monitor, form = await _checked_form(request)
    execution_id: str = request.path_params["execution_id"]
    settings = monitor.settings
    if not settings.definitions:
        raise PageError(400, "No definitions", "start the monitor with --definitions DIR")
    kind, data_text = _field(form, "kind"), _field(form, "data") or "{}"
    event_id = _field(form, "event_id")
    if not kind:
        raise PageError(400, "No event", "type the event kind to send")
    try:
        data = json.loads(data_text)
    except json.JSONDecodeError as err:
        raise PageError(400, "Bad event data", f"the data is not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise PageError(400, "Bad event data", "the data must be a JSON object")
    if _field(form, "confirm") != "yes":
        fields = {"kind": kind, "data": data_text, "event_id": event_id}
        what = f"Send event {kind!r} with data {data_text} to execution {execution_id!r}?"
        return _confirm(monitor, request, request.url.path, what, fields)
    event = Event(kind=kind, data=data, id=event_id) if event_id else Event(kind=kind, data=data)
    try:
        done = await monitor.reader.run(
            deliver,
            monitor.reader.store,
            settings.definitions,
            settings.config,
            execution_id,
            event,
            where=settings.definitions_where,
        )
    except CommandError as exc:
        raise PageError(400, "Not sent", redact_text(str(exc))) from None
    notice = NOTICES[done.outcome].format(kind=kind, event_id=event.id)
    target = sealed_notice(f"/executions/{path_id(execution_id)}", notice, monitor.settings.csrf)
    return RedirectResponse(target, status_code=303)


def _gone(ref: str) -> PageError:
    return PageError(
        404,
        "Dead letter gone",
        f"no dead letter {ref!r}: it was requeued or cleared meanwhile (reload the dead letters)",
    )


async def requeue(request: Request) -> Response:
    """``POST /actions/requeue``: hand the dead letter ``ref``'s event back to the workers
    (same event id) and remove the letter, as ``harel dead-letters --requeue`` does."""
    monitor, form = await _checked_form(request)
    ref = _field(form, "ref")
    if not ref:
        raise PageError(400, "No dead letter", "choose a dead letter to requeue on its page")
    if _field(form, "confirm") != "yes":
        record = await monitor.reader.run(monitor.reader.store.load, DEAD_LETTERS_ID)
        letter = find_letter(record, ref)
        if letter is None:
            raise _gone(ref)
        refusal = requeue_refusal(letter)
        if refusal is not None:
            raise PageError(409, "Not requeueable", refusal)
        what = (
            f"Requeue dead letter {ref!r}: send event {letter.event_kind!r} "
            f"(id {letter.event_id}) to {letter.target_id!r} again, then remove the letter?"
        )
        return _confirm(monitor, request, request.url.path, what, {"ref": ref})
    try:
        done = await monitor.reader.run(requeue_letter, monitor.reader.store, ref)
    except LetterNotFound:
        raise _gone(ref) from None
    except RequeueError as exc:
        raise PageError(409, "Not requeued", redact_text(str(exc))) from None
    target = sealed_notice("/dead-letters", done.describe(), monitor.settings.csrf)
    return RedirectResponse(target, status_code=303)
