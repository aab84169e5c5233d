"""harel-example-jsondir: an example third-party harel store keeping executions as JSON files.

``JsonDirStore`` (sync) and ``AsyncJsonDirStore`` (async, the same store run in worker
threads) implement the full ``ExecutionStore`` contract over a directory guarded by a file
lock; open one with ``JsonDirStore.from_url("jsondir:///abs/dir")`` or, once the package is
installed, ``harel.registry.open_store("jsondir:///abs/dir")``.
"""

from harel_example_jsondir._capabilities import CAPABILITIES
from harel_example_jsondir.aio import AsyncJsonDirStore
from harel_example_jsondir.sync import JsonDirStore

__all__ = ["CAPABILITIES", "AsyncJsonDirStore", "JsonDirStore"]
