"""The leases page's read: which worker holds which lease and until when.

One ``list_leases`` call per page (or poll), bounded by ``limit`` (1..500), read at the
monitor's clock; a store written before the method existed shows a note instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harel.monitor.listing import page_limit
from harel.store.contract import ExecutionStore, Lease

DEFAULT_LIMIT = 100


@dataclass(frozen=True)
class LeaseQuery:
    """The leases to show: at most ``limit`` (1..500) of those held at the time of the read."""

    limit: int = DEFAULT_LIMIT

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> LeaseQuery:
        """Read ``limit`` from the query string; PageError (400) when it is not 1..500."""
        return cls(limit=page_limit(query, DEFAULT_LIMIT))

    def fetch(self, store: ExecutionStore, now: float) -> list[Lease] | None:
        """The leases held at ``now``, in the store's order (``None``: the store has no
        ``list_leases``)."""
        list_leases = getattr(store, "list_leases", None)
        if list_leases is None:
            return None
        leases: list[Lease] = list_leases(now, limit=self.limit)
        return leases

    def query_string(self) -> str:
        """``limit=N`` when it is not the default, else empty."""
        return "" if self.limit == DEFAULT_LIMIT else f"limit={self.limit}"


def leases_fingerprint(leases: Sequence[Lease] | None) -> str:
    """A digest of what the leases page shows (groups, owners, expiries, in order)."""
    digest = hashlib.sha256()
    for lease in leases or ():
        digest.update(f"{lease.execution_id}\0{lease.owner}\0{lease.expires_at!r}\0".encode())
    return digest.hexdigest()[:16]
