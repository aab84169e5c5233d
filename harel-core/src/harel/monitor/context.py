"""The monitor's per-application state and the one way pages are rendered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from harel.monitor.formatting import FILTERS
from harel.monitor.reader import StoreReader
from harel.monitor.settings import MonitorSettings


def template_environment() -> jinja2.Environment:
    """The templates shipped in ``harel/monitor/templates``, autoescaped, strict undefined."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("harel.monitor", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    return env


@dataclass(frozen=True)
class Monitor:
    """What every handler reads: the store reader, the settings and the templates."""

    reader: StoreReader
    settings: MonitorSettings
    templates: Jinja2Templates

    def render(
        self, request: Request, name: str, context: dict[str, Any], status_code: int = 200
    ) -> Response:
        """Render ``name`` with ``context`` plus what the layout needs (never the raw URL)."""
        base: dict[str, Any] = {
            "store_label": self.settings.store_label,
            "allow_writes": self.settings.allow_writes,
            "csrf": self.settings.csrf,
            "poll_url": "",
            "fingerprint": "",
        }
        return self.templates.TemplateResponse(
            request, name, {**base, **context}, status_code=status_code
        )


def monitor_of(request: Request) -> Monitor:
    """The :class:`Monitor` of the application serving ``request``."""
    monitor: Monitor = request.app.state.monitor
    return monitor
