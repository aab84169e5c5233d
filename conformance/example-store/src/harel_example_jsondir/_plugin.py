"""The ``harel.stores`` entry point of harel-example-jsondir: registers the ``jsondir`` backend.

Imports nothing but core's registry and contract: ``harel stores`` lists the backend without
importing the store, its file layer or ``filelock`` (the classes are named by import string).
"""

from __future__ import annotations

from collections.abc import Callable

from harel.registry import StoreBackend, hookimpl
from harel.store.contract import Capabilities

DISTRIBUTION = "harel-example-jsondir"

CAPABILITIES = Capabilities(
    persistent=True,  # files on disk survive the process
    multi_process=True,  # every operation holds a file lock on the directory
    ordered_listing=True,  # listing sorts by id
    exact_pages=True,  # filters run before the page is cut
)


BACKEND = StoreBackend(
    name="jsondir",
    schemes=("jsondir",),
    store="harel_example_jsondir.sync:JsonDirStore",
    async_store="harel_example_jsondir.aio:AsyncJsonDirStore",
    capabilities=CAPABILITIES,
    distribution=DISTRIBUTION,
    harness="harel_example_jsondir.testing:harness_from_url",
    local_url="jsondir://{workdir}/harel",
    exists="harel_example_jsondir._exists:store_exists",
    description="Example third-party store: executions as JSON files in a locked directory.",
)


@hookimpl
def harel_register_stores(register: Callable[[StoreBackend], None]) -> None:
    """Register the jsondir backend."""
    register(BACKEND)
