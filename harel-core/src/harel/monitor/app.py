"""The monitor's ASGI application: routes, static files, the token gate, error pages.

``create_app(store, settings)`` serves one already-open sync store; the caller closes it.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from harel.monitor import live, pages, writes
from harel.monitor.access import SecurityHeaders, TokenGate
from harel.monitor.context import Monitor, template_environment
from harel.monitor.errors import ErrorPages, PageError
from harel.monitor.reader import StoreReader
from harel.monitor.settings import MonitorSettings
from harel.store.contract import ExecutionStore

ROUTES = [
    Route("/", pages.executions, name="executions"),
    Route("/executions/{execution_id:path}", pages.execution, name="execution"),
    Route("/dead-letters", pages.dead_letters, name="dead_letters"),
    Route("/leases", pages.leases, name="leases"),
    Route("/api/summary", live.summary, name="summary"),
    Route("/api/version/{execution_id:path}", live.version, name="version"),
    Route("/api/leases", live.leases, name="leases_summary"),
    Route("/actions/send/{execution_id:path}", writes.send, methods=["POST"], name="send"),
    Route("/actions/purge/{execution_id:path}", writes.purge, methods=["POST"], name="purge"),
    Route("/actions/requeue", writes.requeue, methods=["POST"], name="requeue"),
    Mount("/static", StaticFiles(packages=[("harel.monitor", "static")]), name="static"),
]


def create_app(store: ExecutionStore, settings: MonitorSettings) -> Starlette:
    """The monitor over ``store``: every page reads it through the contract, in a worker
    thread; with ``settings.token`` every request must carry the token."""
    monitor = Monitor(
        reader=StoreReader(store),
        settings=settings,
        templates=Jinja2Templates(env=template_environment()),
    )

    def error_page(request: Request, error: PageError) -> Response:
        return monitor.render(
            request,
            "error.html",
            {"title": error.title, "message": error.message, "status": error.status},
            status_code=error.status,
        )

    app = Starlette(
        routes=ROUTES,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(TokenGate, token=settings.token),
            Middleware(ErrorPages, render=error_page),
        ],
    )
    app.state.monitor = monitor
    return app
