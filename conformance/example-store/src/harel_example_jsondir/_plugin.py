"""The ``harel.stores`` entry point of harel-example-jsondir: registers the ``jsondir`` backend.

Imports nothing but core's registry and the capability flags, so ``harel stores`` can list
the backend without importing the store (or filelock).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version

from harel.registry import StoreBackend, hookimpl

from harel_example_jsondir._capabilities import CAPABILITIES

DISTRIBUTION = "harel-example-jsondir"


def _version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"


BACKEND = StoreBackend(
    name="jsondir",
    schemes=("jsondir",),
    store="harel_example_jsondir.sync:JsonDirStore",
    async_store="harel_example_jsondir.aio:AsyncJsonDirStore",
    capabilities=CAPABILITIES,
    distribution=DISTRIBUTION,
    version=_version(),
    harness="harel_example_jsondir.testing:harness_from_url",
    local_url="jsondir://{workdir}/harel",
    description="Example third-party store: executions as JSON files in a locked directory.",
)


@hookimpl
def harel_register_stores(register: Callable[[StoreBackend], None]) -> None:
    """Register the jsondir backend."""
    register(BACKEND)
