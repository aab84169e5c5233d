"""The DynamoDB backend's legacy environment variables (upstream's worker).

``STM_DYNAMODB_ENDPOINT`` (a local server: dummy credentials, as upstream did),
``STM_AWS_REGION`` and ``STM_DYNAMODB_TABLE`` (default ``harel``; upstream used seven
``harel_*`` tables, this backend one).  Named by the plugin's ``StoreBackend.legacy_env``;
imports no driver.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode


def url_from_env(env: Mapping[str, str]) -> str | None:
    """``dynamodb://TABLE?region=...&endpoint_url=...&local=true&create_table=true``, or
    ``None`` when none of the variables is set (the table is created on first use, as
    upstream created its tables)."""
    endpoint = (env.get("STM_DYNAMODB_ENDPOINT") or "").strip()
    region = (env.get("STM_AWS_REGION") or "").strip()
    table = (env.get("STM_DYNAMODB_TABLE") or "").strip()
    if not (endpoint or region or table):
        return None
    query = {"region": region or "us-east-1", "create_table": "true"}
    if endpoint:
        query.update(endpoint_url=endpoint, local="true")
    return f"dynamodb://{table or 'harel'}?{urlencode(query)}"
