"""The jsondir backend as core's registry and URL parsing see it; imports no ``filelock`` and
no store code.

``jsondir:///abs/dir`` (absolute) or ``jsondir://relative/dir`` (relative to the working
directory).  Knobs (query string, or keyword arguments which win): ``trace_max`` (int, 0 or
``none``: unbounded), ``fsync`` (bool, default true: flush every file to disk before it replaces
the old one) and ``lock_timeout`` (seconds to wait for the directory lock before raising
``StoreUnavailable``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlencode

from harel.store.author import BackendSpec, Knob, StoreURL, trace_max_knob
from harel.store.contract import DEFAULT_TRACE_MAX, Capabilities
from harel.store.errors import InvalidStoreURL

SCHEME = "jsondir"
DEFAULT_LOCK_TIMEOUT = 60.0


def _location(parsed: StoreURL) -> dict[str, Any]:
    """The directory (relative paths kept relative: the text after ``jsondir://``)."""
    rest = parsed.raw.split("://", 1)[1].split("?", 1)[0].split("#", 1)[0]
    if not unquote(rest).strip("/"):
        raise InvalidStoreURL(f"{parsed.redacted!r} names no directory: use jsondir:///abs/dir")
    return {"directory": Path(unquote(rest))}


SPEC = BackendSpec(
    name="jsondir",
    title="jsondir",
    schemes=(SCHEME,),
    url_forms=("jsondir:///abs/dir", "jsondir://relative/dir"),
    store="harel_example_jsondir.sync:JsonDirStore",
    async_store="harel_example_jsondir.aio:AsyncJsonDirStore",
    capabilities=Capabilities(
        persistent=True,  # files on disk survive the process
        multi_process=True,  # every operation holds a file lock on the directory
        ordered_listing=True,  # listing sorts by id
        exact_pages=True,  # filters run before the page is cut
    ),
    distribution="harel-example-jsondir",
    location=_location,
    knobs=(
        trace_max_knob(),
        Knob("fsync", bool, True, doc="flush every file before it replaces the old one"),
        Knob("lock_timeout", float, DEFAULT_LOCK_TIMEOUT, minimum=0, doc="seconds"),
    ),
    harness="harel_example_jsondir.testing:harness_from_url",
    local_url="jsondir://{workdir}/harel",
    exists="harel_example_jsondir._exists:store_exists",
    description="Example third-party store: executions as JSON files in a locked directory.",
)
"""The backend's declaration; the ``harel.stores`` entry point names it."""
CAPABILITIES = SPEC.capabilities


@dataclass(frozen=True)
class JsonDirOptions:
    """Everything a jsondir store is built from."""

    directory: Path
    trace_max: int | None = DEFAULT_TRACE_MAX
    fsync: bool = True
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT

    def as_kwargs(self) -> dict[str, Any]:
        """The options as the stores' constructor keywords."""
        return asdict(self)

    def url(self) -> str:
        """A ``jsondir://`` URL that opens the same directory with the same options."""
        query = {
            "trace_max": self.trace_max or 0,
            "fsync": "true" if self.fsync else "false",
            "lock_timeout": self.lock_timeout,
        }
        path = quote(str(self.directory.absolute()), safe="/")
        return f"{SCHEME}://{path}?{urlencode(query)}"


def parse_url(url: str, **overrides: Any) -> JsonDirOptions:
    """Options from ``url`` and keyword ``overrides`` (keywords win; every knob checked)."""
    arguments, _retry = SPEC.open_args(url, overrides)
    return JsonDirOptions(**arguments)
