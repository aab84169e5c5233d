"""The SQLite backend's legacy environment variable (``STM_STORE_DB``, upstream's worker).

Named by the plugin's ``StoreBackend.legacy_env``; core calls it only when ``STM_STORE_URL``
is not set.  Imports no driver.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote


def url_from_env(env: Mapping[str, str]) -> str | None:
    """``sqlite:///<STM_STORE_DB>`` (a relative or absolute path, or ``:memory:``), or ``None``
    when the variable is not set."""
    path = (env.get("STM_STORE_DB") or "").strip()
    if not path:
        return None
    return f"sqlite:///{quote(path, safe='/:')}"
