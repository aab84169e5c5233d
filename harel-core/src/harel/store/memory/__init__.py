"""The in-memory reference store: the most obvious implementation of the contract.

``DictStore`` (:mod:`.sync`) is plain methods over the plain dicts of one
:class:`~harel.store.memory._tables.MemoryData` under its lock, with sorted lists indexing
ids, due timers, mark ages, relay seqs and ready work, so sweeps, listing, purge and prune read
only what they return.  ``AsyncDictStore`` (:mod:`.aio`) runs the same methods without ever
suspending.  :mod:`._spec` registers ``memory://`` without importing either store, and
:mod:`.testing` is the conformance kit's harness.  Values are held as the shared codec's JSON
text, so a store never aliases the caller's objects and has exactly the type fidelity of the
durable backends.

The names below are re-exported lazily: importing this package imports no store module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harel.store.common.lazy import lazy_exports

if TYPE_CHECKING:
    from harel.store.memory._spec import CAPABILITIES
    from harel.store.memory._tables import MemoryData
    from harel.store.memory.aio import AsyncDictStore
    from harel.store.memory.sync import DictStore

_EXPORTS = {
    "CAPABILITIES": "harel.store.memory._spec",
    "AsyncDictStore": "harel.store.memory.aio",
    "DictStore": "harel.store.memory.sync",
    "MemoryData": "harel.store.memory._tables",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = ["CAPABILITIES", "AsyncDictStore", "DictStore", "MemoryData"]
