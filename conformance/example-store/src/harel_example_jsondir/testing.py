"""What jsondir hands the conformance kit: one fresh directory per test.

``JsonDirHarness(path)`` opens stores over ``path`` (which it deletes in ``destroy``);
``harness_from_url(url, workdir)`` is the registry's hook for ``harel conformance URL``: it
makes a new, empty ``kit-<random>`` folder *inside* the URL's directory (so the kit exercises
the file system the URL points at, e.g. a network mount) and never reads or deletes data
already there.  The URL's ``fsync`` and ``lock_timeout`` apply; its ``trace_max`` does not.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from harel.conformance.harness import StoreHarness
from harel.store.contract import (
    DEFAULT_TRACE_MAX,
    AsyncExecutionStore,
    Capabilities,
    ExecutionStore,
)

from harel_example_jsondir import _schema
from harel_example_jsondir._spec import CAPABILITIES, JsonDirOptions, parse_url
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
        return await AsyncJsonDirStore.open(**self.options.as_kwargs())

    def url(self) -> str:
        """A ``jsondir://`` URL of the directory (any process on this machine can open it)."""
        return self.options.url()

    def footprint(self, execution_id: str) -> list[str]:
        """What the directory holds for ``execution_id``, read from the files themselves."""
        root = self.directory.absolute()
        labels: list[str] = []
        if (root / _schema.document_path(execution_id)).exists():
            labels.append("execution")
        state_file = root / _schema.STATE
        state = json.loads(state_file.read_text("utf-8")) if state_file.exists() else {}
        if execution_id in state.get("executions", {}):
            labels.append("index")
        labels += [
            f"processed:{event}" for event in state.get("processed", {}).get(execution_id, {})
        ]
        labels += [
            f"timer:{path}" for exe, path, _ in state.get("timers", []) if exe == execution_id
        ]
        labels += [
            f"outbox:{seq}" for seq, target, _ in state.get("outbox", []) if target == execution_id
        ]
        labels += [f"spawn:{row[0]}" for row in state.get("spawns", []) if row[1] == execution_id]
        labels += [
            f"quarantined:{seq}"
            for seq, _, row, _ in state.get("quarantine", [])
            if row[0] == execution_id
        ]
        labels += ["work"] * sum(row[0] == execution_id for row in state.get("work", []))
        trace_file = root / _schema.trace_path(execution_id)
        if trace_file.exists():
            ring = json.loads(trace_file.read_text("utf-8"))
            labels += [f"trace:{index}" for index, _ in ring["steps"]] or ["trace-file"]
        return labels

    def raw_commit(self) -> Callable[[str, int, str], None]:
        """The benchmarks' raw write: the document replaces a scratch file of the directory
        (``bench-raw/``) atomically (a temp file, flushed to disk when ``fsync`` is on, then
        renamed); no lock, no CAS: a file system's cheapest durable write of one document."""
        folder = self.directory / "bench-raw"
        folder.mkdir(parents=True, exist_ok=True)
        fsync = self.options.fsync

        def write(execution_id: str, version: int, document: str) -> None:
            del version
            target = folder / f"{_schema.name_of(execution_id)}.json"
            temp = target.with_suffix(".tmp")
            with open(temp, "w", encoding="utf-8") as handle:
                handle.write(document)
                if fsync:
                    handle.flush()
                    os.fsync(handle.fileno())
            os.replace(temp, target)

        return write

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
