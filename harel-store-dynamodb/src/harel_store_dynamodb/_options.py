"""One DynamoDB store's validated settings: :class:`DynamoOptions`, built by
:func:`make_options` from a table and the knobs :data:`~harel_store_dynamodb._spec.SPEC`
declares; no credential reaches a ``repr`` or a description."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from harel.store.author import redact_url

from harel_store_dynamodb._spec import LOCAL_REGION, SCHEME, SPEC, table_name


@dataclass(frozen=True)
class DynamoOptions:
    """Validated settings of one store (build it with :func:`make_options`); ``repr`` and
    :meth:`describe` never show a credential."""

    table: str
    region: str | None
    endpoint_url: str | None
    profile: str | None
    local: str
    create_table: bool
    trace_max: int | None
    request_timeout: float
    max_attempts: int
    index_shards: int | None
    """``None``: the table's recorded count (a new table gets ``DEFAULT_INDEX_SHARDS``)."""
    aws_access_key_id: str | None = field(repr=False)
    aws_secret_access_key: str | None = field(repr=False)

    @property
    def is_local(self) -> bool:
        """A local DynamoDB-compatible server (dummy credentials allowed)."""
        return self.local != "false"

    @property
    def region_name(self) -> str | None:
        """The region to sign for (``us-east-1`` for local servers unless given)."""
        return self.region or (LOCAL_REGION if self.is_local else None)

    def describe(self, endpoint_url: str | None = None) -> str:
        """``dynamodb://TABLE?region=...&endpoint_url=...`` without credentials."""
        query: dict[str, str] = {}
        if self.region_name:
            query["region"] = self.region_name
        endpoint = endpoint_url or self.endpoint_url
        if endpoint:
            query["endpoint_url"] = redact_url(endpoint)
        if self.is_local:
            query["local"] = "true" if endpoint_url else self.local
        return f"{SCHEME}://{self.table}" + (f"?{urlencode(query)}" if query else "")


def make_options(table: str, **knobs: Any) -> DynamoOptions:
    """The settings of ``table`` with ``knobs`` (each checked against :data:`SPEC`:
    ``InvalidStoreURL`` / ``InvalidStoreOption``, both ``ValueError``)."""
    return DynamoOptions(table_name(table, f"table={table!r}"), **SPEC.knob_values(knobs))
