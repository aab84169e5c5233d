"""One PostgreSQL store's validated settings: :class:`PostgresOptions`, built by
:func:`make_options` from a URL and the knobs :data:`~harel_store_postgres._spec.SPEC`
declares; the libpq keywords (the password among them) never reach a ``repr``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from harel.store.author import retry_arguments

from harel_store_postgres._spec import SPEC

_DEFAULTS = SPEC.defaults


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    """Validated settings of one store (build it with :func:`make_options`; by hand, each
    knob is checked again when a store opens it).  ``connect`` (libpq keywords, the password
    among them) is left out of the ``repr``; ``where`` is the redacted URL of every message."""

    connect: Mapping[str, str] = field(repr=False)
    where: str
    schema: str = _DEFAULTS["schema"]
    pool_min: int = _DEFAULTS["pool_min"]
    pool_max: int = _DEFAULTS["pool_max"]
    pool_timeout: float = _DEFAULTS["pool_timeout"]
    trace_max: int | None = _DEFAULTS["trace_max"]
    connect_retries: int = SPEC.retry[0]
    retry_delay: float = SPEC.retry[1]
    reconnect_timeout: float = _DEFAULTS["reconnect_timeout"]

    def with_schema(self, schema: str) -> PostgresOptions:
        """The same settings over another schema (validated as the ``schema`` knob)."""
        return replace(self, schema=SPEC.by_name["schema"].validate(schema))

    def retry_arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``connect_with_retry`` / ``aconnect_with_retry`` for the
        open (validated again: options built by hand are refused with ``ValueError`` too)."""
        knobs = {"connect_retries": self.connect_retries, "retry_delay": self.retry_delay}
        retries, delay = SPEC.retry
        return retry_arguments(knobs, what=self.where, default_retries=retries, default_delay=delay)


def make_options(url: str, **knobs: Any) -> PostgresOptions:
    """The settings of the store ``url`` names with ``knobs`` (keywords win over the URL's),
    each checked against :data:`SPEC` (``InvalidStoreURL`` / ``InvalidStoreOption``, the
    password never shown; a bad retry knob: ``ValueError``)."""
    arguments, retry = SPEC.open_args(url, knobs)
    return PostgresOptions(
        **arguments, connect_retries=retry["retries"], retry_delay=retry["delay"]
    )
