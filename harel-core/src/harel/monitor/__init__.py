"""``harel monitor``: a local web view of any store, read through the store contract alone.

Install it with ``pip install 'harel-core[monitor]'`` (Starlette, uvicorn, Jinja2).  Nothing
here is imported by ``harel`` itself: :func:`harel.monitor.app.create_app` builds the ASGI
application, :mod:`harel.cli.monitor_cmd` serves it.  Modules, one job each:

* :mod:`~harel.monitor.settings` — what the monitor was started with, the bind rule;
* :mod:`~harel.monitor.access` — the access token gate and the CSRF secret;
* :mod:`~harel.monitor.reader` — store calls off the event loop, one at a time;
* :mod:`~harel.monitor.counting` — bounded counts by status;
* :mod:`~harel.monitor.timeline` — trace steps as timeline rows with context diffs;
* :mod:`~harel.monitor.formatting` — the template filters (JSON, times, "in 3 min");
* :mod:`~harel.monitor.pages` — the read-only pages; :mod:`~harel.monitor.live` — the
  polled JSON endpoints; :mod:`~harel.monitor.writes` — send and purge (``--allow-writes``);
* :mod:`~harel.monitor.errors` — store errors as a friendly, redacted error page.
"""

from __future__ import annotations

INSTALL_HINT = "pip install 'harel-core[monitor]'"
"""What to run when the monitor's extra is not installed."""

__all__ = ["INSTALL_HINT"]
