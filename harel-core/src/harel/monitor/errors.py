"""Errors as pages: a friendly page with the error's type and redacted message, never a
traceback.  JSON endpoints (``/api/...``) get the same as a JSON object."""

from __future__ import annotations

import logging
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from harel.store.common.urls import redact_text
from harel.store.errors import ExecutionNotFound, InvalidCursor

LOGGER = logging.getLogger("harel.monitor")


class PageError(Exception):
    """A request the monitor answers with an error page: ``status``, a title and a message
    saying what to do."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.title = title
        self.message = message


def _describe(exc: Exception) -> PageError:
    if isinstance(exc, PageError):
        return exc
    text = redact_text(" ".join(str(exc).split())) or "(no message)"
    kind = type(exc).__name__
    if isinstance(exc, InvalidCursor):
        return PageError(400, "Invalid cursor", f"{kind}: {text}; start again from the first page")
    if isinstance(exc, ExecutionNotFound):
        return PageError(404, "Not found", f"{kind}: {text}")
    return PageError(500, "The store answered with an error", f"{kind}: {text}")


class ErrorPages:
    """ASGI middleware: an exception raised while handling a request becomes an error page
    (status from :class:`PageError`, else 400/404/500), logged as one redacted line."""

    def __init__(self, app: ASGIApp, render: Callable[[Request, PageError], Response]) -> None:
        self.app = app
        self.render = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request; answer with an error page if it raised before responding."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            error = _describe(exc)
            if error.status >= 500:
                LOGGER.warning("harel monitor: %s %s: %s", scope["method"], error.title, error)
            if started:
                return  # the response is under way: nothing more can be sent
            response = self._response(Request(scope), error)
            await response(scope, receive, send)

    def _response(self, request: Request, error: PageError) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse(
                {"error": error.title, "message": error.message}, status_code=error.status
            )
        try:
            response = self.render(request, error)
        except Exception:  # the page itself failed: plain text, still redacted
            return HTMLResponse(f"<h1>{error.status}</h1>", status_code=error.status)
        return response
