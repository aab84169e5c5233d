"""Upstream's variables (``STM_DYNAMODB_ENDPOINT``, ``STM_AWS_REGION``, ``STM_DYNAMODB_TABLE``)
as a store URL: the function :data:`~harel_store_dynamodb._spec.SPEC`'s ``legacy_env`` names."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

from harel_store_dynamodb._spec import LEGACY_VARS, LOCAL_REGION, SCHEME

DEFAULT_TABLE = "harel"
"""The table of the reference implementation's forms (``DynamoDBStore(client)``,
``create()``), which took a ``prefix`` (default ``harel``): here it names the one table."""


def legacy_url(env: Mapping[str, str]) -> str | None:
    """Upstream's variables as ``dynamodb://TABLE?region=...&create_table=true`` (plus
    ``endpoint_url=...&local=true`` for ``STM_DYNAMODB_ENDPOINT``: dummy credentials), or
    ``None`` when none is set; the table defaults to ``harel``, the region to ``us-east-1``."""
    endpoint, region, table = ((env.get(name) or "").strip() for name in LEGACY_VARS)
    if not (endpoint or region or table):
        return None
    query = {"region": region or LOCAL_REGION, "create_table": "true"}
    if endpoint:
        query.update(endpoint_url=endpoint, local="true")
    return f"{SCHEME}://{table or DEFAULT_TABLE}?{urlencode(query)}"
