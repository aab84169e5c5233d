"""What jsondir hands the conformance kit: one fresh directory per test.

``JsonDirHarness(path)`` opens stores over ``path`` (which it deletes in ``destroy``);
``harness_from_url(url, workdir)`` is the registry's hook for ``harel conformance URL``: it
makes a new, empty ``kit-<random>`` folder *inside* the URL's directory (so the kit exercises
the file system the URL points at, e.g. a network mount) and never reads or deletes data
already there.  The URL's ``fsync`` and ``lock_timeout`` apply; its ``trace_max`` does not.
"""

from __future__ import annotations

import functools
import shutil
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import anyio.to_thread
from harel.conformance.harness import StoreHarness
from harel.store.contract import (
    DEFAULT_TRACE_MAX,
    AsyncExecutionStore,
    Capabilities,
    ExecutionStore,
)

from harel_example_jsondir._capabilities import CAPABILITIES
from harel_example_jsondir._url import JsonDirOptions, parse_url
from harel_example_jsondir.aio import AsyncJsonDirStore
from harel_example_jsondir.sync import JsonDirStore


class JsonDirHarness(StoreHarness):
    """One isolated jsondir directory; every ``open_*`` is a new store over it."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(self, directory: Path, **options: Any) -> None:
        self.options = JsonDirOptions(Path(directory), **options)

    @classmethod
    def from_options(cls, options: JsonDirOptions) -> JsonDirHarness:
        """A harness over ``options.directory`` with the other options carried over."""
        return cls(**options.as_kwargs())

    @property
    def directory(self) -> Path:
        """The dataset's directory."""
        return self.options.directory

    def open_sync(self) -> ExecutionStore:
        """A new :class:`JsonDirStore` over the directory."""
        return JsonDirStore(**self.options.as_kwargs())

    async def open_async(self) -> AsyncExecutionStore:
        """A new :class:`AsyncJsonDirStore` over the directory."""
        make = functools.partial(AsyncJsonDirStore, **self.options.as_kwargs())
        return await anyio.to_thread.run_sync(make)

    def destroy(self) -> None:
        """Delete the directory and everything in it."""
        shutil.rmtree(self.directory, ignore_errors=True)

    def describe(self) -> str:
        """``jsondir at <directory>``."""
        return f"jsondir at {self.directory}"


def harness_from_url(url: str, workdir: Path) -> JsonDirHarness:
    """A harness over a new empty folder inside the directory ``url`` names.

    ``workdir`` (the caller's scratch space) is not needed: the URL says where data goes.
    """
    del workdir
    options = parse_url(url)
    dataset = options.directory.absolute() / f"kit-{uuid.uuid4().hex[:12]}"
    # The kit sets trace_max itself where it matters; a URL's ring size would skew it.
    return JsonDirHarness.from_options(
        replace(options, directory=dataset, trace_max=DEFAULT_TRACE_MAX)
    )
