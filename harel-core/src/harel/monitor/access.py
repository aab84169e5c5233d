"""The access token gate: with a token set, every request must carry it.

A request proves it knows the token by ``Authorization: Bearer T``, by the cookie this gate
set, or by ``?token=T`` (first visit from a link): the gate then sets the cookie and
redirects to the same address without the token, so it stays out of history and logs.  All
comparisons use :func:`hmac.compare_digest`.  The cookie holds a digest of the token, never
the token itself.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlencode

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "harel_monitor"

_REFUSED = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>harel monitor: access token needed</title></head><body>
<h1>Access token needed</h1>
<p>This monitor was started with an access token. Open it with <code>?token=...</code>
once (a cookie keeps you signed in), or send <code>Authorization: Bearer ...</code>.</p>
</body></html>"""


def same_secret(given: str | None, expected: str) -> bool:
    """True when ``given`` equals ``expected``, compared in constant time."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def _seal(text: str, secret: str) -> str:
    return hmac.new(secret.encode("utf-8"), text.encode("utf-8"), hashlib.sha256).hexdigest()


def sealed_notice(path: str, text: str, secret: str) -> str:
    """``path`` with ``text`` as a notice the next page shows: sealed with ``secret`` (the
    process's CSRF secret), so a crafted link cannot put its own words on a monitor page."""
    return f"{path}?{urlencode({'notice': text, 'seal': _seal(text, secret)})}"


def unsealed_notice(request: Request, secret: str) -> str | None:
    """The notice of a :func:`sealed_notice` address; ``None`` when absent or not sealed by
    this process."""
    text = request.query_params.get("notice")
    if text is None or not same_secret(request.query_params.get("seal"), _seal(text, secret)):
        return None
    return text


def cookie_value(token: str) -> str:
    """What the cookie holds for ``token``: a digest, so the cookie never reveals it."""
    return hmac.new(token.encode("utf-8"), b"harel-monitor-session", hashlib.sha256).hexdigest()


def _bearer(request: Request) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def _without_token(url: URL) -> str:
    return str(url.remove_query_params("token"))


class TokenGate:
    """ASGI middleware: requests without the token get a 401 page (nothing of the store)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token
        self.cookie = cookie_value(token) if token is not None else ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass an authorised request on; answer any other one here."""
        if scope["type"] != "http" or self.token is None:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        response = self._answer(request, self.token)
        if response is None:
            await self.app(scope, receive, send)
        else:
            await response(scope, receive, send)

    def _answer(self, request: Request, token: str) -> Response | None:
        query_token = request.query_params.get("token")
        if query_token is not None and same_secret(query_token, token):
            response: Response = RedirectResponse(_without_token(request.url), status_code=303)
            response.set_cookie(COOKIE, self.cookie, httponly=True, samesite="strict")
            return response
        if same_secret(_bearer(request), token):
            return None
        if same_secret(request.cookies.get(COOKIE), self.cookie):
            return None
        return HTMLResponse(_REFUSED, status_code=401, headers={"WWW-Authenticate": "Bearer"})


SECURITY_HEADERS = (
    (
        b"content-security-policy",
        b"default-src 'self'; style-src 'self' 'unsafe-inline'; "
        b"img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)
"""Sent with every response: only this monitor's scripts run, no page can frame it (the write
buttons cannot be clicked through another site), no address leaks in a Referer header."""


class SecurityHeaders:
    """ASGI middleware adding :data:`SECURITY_HEADERS` to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add the headers to its response's start."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)
