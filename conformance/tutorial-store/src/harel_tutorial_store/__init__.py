"""harel-tutorial-store: the "writing a store" tutorial's backend (``conformance/tutorial-store``).

This module is the backend's *declaration*, the object its ``harel.stores`` entry point names:
:data:`SPEC` says the URL scheme, the knobs, the capabilities and where the store classes are.
Listing the installed backends imports it, so it imports no store: the store itself is one
module, :mod:`harel_tutorial_store.store`, loaded on first use of the names below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harel.store.author import BackendSpec, StoreURL, lazy_exports, trace_max_knob
from harel.store.contract import Capabilities
from harel.store.errors import InvalidStoreURL

if TYPE_CHECKING:
    from harel_tutorial_store.store import AsyncTutorialStore, Tables, TutorialStore

__all__ = ["CAPABILITIES", "SPEC", "AsyncTutorialStore", "Tables", "TutorialStore"]

CAPABILITIES = Capabilities(
    persistent=False, multi_process=False, ordered_listing=True, exact_pages=True
)
"""In this process only; listing is ordered by id and every page is exact."""


def _location(url: StoreURL) -> dict[str, Any]:
    """The store's constructor arguments for a URL's shape (everything but the knobs):
    ``tutorial://`` is a new private dataset, ``tutorial://NAME`` the dataset NAME of this
    process, shared by every store that opens it."""
    if url.username or url.password or url.port:
        raise InvalidStoreURL(
            f"{url.redacted!r} names a server, but a tutorial store lives in this process: "
            "use tutorial:// or tutorial://NAME"
        )
    return {"dataset": (url.host or "") + url.path.strip("/")}


SPEC = BackendSpec(
    name="tutorial",
    title="tutorial",
    schemes=("tutorial",),
    url_forms=("tutorial://", "tutorial://NAME"),
    store="harel_tutorial_store.store:TutorialStore",
    async_store="harel_tutorial_store.store:AsyncTutorialStore",
    capabilities=CAPABILITIES,
    distribution="harel-tutorial-store",
    location=_location,
    knobs=(trace_max_knob(),),
    harness="harel_tutorial_store.testing:harness_from_url",
    local_url="tutorial://",
    description="the tutorial's one-module store: dicts under one lock, in process",
)
"""The backend's declaration; the ``harel.stores`` entry point names it."""

_STORE = "harel_tutorial_store.store"
__getattr__ = lazy_exports(
    __name__, {"AsyncTutorialStore": _STORE, "Tables": _STORE, "TutorialStore": _STORE}
)
