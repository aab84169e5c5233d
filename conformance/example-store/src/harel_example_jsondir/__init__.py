"""harel-example-jsondir: an example third-party harel store keeping executions as JSON files.

``JsonDirStore`` (sync) and ``AsyncJsonDirStore`` (async: the same operations run whole in
one worker thread per store) implement the full ``ExecutionStore`` contract over a directory
guarded by a file lock; open one with ``JsonDirStore.from_url("jsondir:///abs/dir")`` or, once
the package is installed, ``harel.registry.open_store("jsondir:///abs/dir")``.

The classes are imported on first access, so importing the plugin module
(``harel_example_jsondir._spec``) loads neither the store nor ``filelock``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harel.store.author import lazy_exports

if TYPE_CHECKING:
    from harel_example_jsondir._spec import CAPABILITIES
    from harel_example_jsondir.aio import AsyncJsonDirStore
    from harel_example_jsondir.sync import JsonDirStore

__all__ = ["CAPABILITIES", "AsyncJsonDirStore", "JsonDirStore"]

_LAZY = {
    "CAPABILITIES": "harel_example_jsondir._spec",
    "JsonDirStore": "harel_example_jsondir.sync",
    "AsyncJsonDirStore": "harel_example_jsondir.aio",
}


__getattr__ = lazy_exports(__name__, _LAZY)
