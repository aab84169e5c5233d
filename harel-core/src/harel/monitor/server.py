"""Serve the monitor with uvicorn (``harel monitor``), access log off.

The access log is off because a first visit's address may carry ``?token=``; errors are
logged by :mod:`harel.monitor.errors` as one redacted line each.
"""

from __future__ import annotations

from harel.monitor.app import create_app
from harel.monitor.settings import MonitorSettings
from harel.store.contract import ExecutionStore


def serve(store: ExecutionStore, settings: MonitorSettings, *, host: str, port: int) -> None:
    """Serve the monitor of ``store`` on ``host:port`` until interrupted."""
    import uvicorn

    app = create_app(store, settings)
    uvicorn.run(app, host=host, port=port, access_log=False, log_level="warning")
