"""One libSQL store's validated settings: :class:`LibsqlOptions` (its mode, the driver's
keywords), built by :func:`make_options` from a database and the knobs
:data:`~harel_store_libsql._spec.SPEC` declares, with each mode's rules; the token never
reaches a ``repr`` or a message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harel.store.author import redact_url
from harel.store.errors import InvalidStoreOption, InvalidStoreURL

from harel_store_libsql._modes import MEMORY, REMOTE_SCHEMES, Mode, check_server
from harel_store_libsql._spec import SPEC


@dataclass(frozen=True, slots=True)
class LibsqlOptions:
    """Validated settings of one store (build it with :func:`make_options`); ``repr`` and
    :attr:`where` never show the token."""

    database: str
    auth_token: str | None = field(repr=False)
    sync_url: str | None
    sync_interval: float | None
    trace_max: int | None
    busy_timeout_ms: int
    synchronous: str

    @property
    def mode(self) -> Mode:
        """``"server"`` (``database`` is a URL), ``"replica"`` (``sync_url``) or ``"file"``."""
        scheme, sep, _rest = self.database.partition("://")
        if sep and scheme.lower() in REMOTE_SCHEMES:
            return "server"
        return "file" if self.sync_url is None else "replica"

    @property
    def local(self) -> bool:
        """Whether the engine runs in-process on a local file (file, replica)."""
        return self.mode != "server"

    @property
    def in_memory(self) -> bool:
        """A private in-memory database (no WAL, nothing persists)."""
        return self.database == MEMORY

    @property
    def where(self) -> str:
        """The database as named in messages (no secret)."""
        if self.mode == "server":
            return f"libSQL server {redact_url(self.database)}"
        if self.sync_url is not None:
            return f"libSQL replica {self.database!r} of {redact_url(self.sync_url)}"
        return f"libSQL database {self.database!r}"

    @property
    def secrets(self) -> tuple[str, ...]:
        """Strings no message may show (the token), for scrubbing driver messages."""
        return (self.auth_token,) if self.auth_token else ()

    def connect_kwargs(self) -> dict[str, Any]:
        """``libsql.connect``'s keywords besides the database: autocommit (every transaction is
        the plan's own ``BEGIN IMMEDIATE``), busy timeout 0 (the store waits for locks)."""
        kwargs: dict[str, Any] = {"isolation_level": None, "_check_same_thread": False}
        if self.local:
            kwargs["timeout"] = 0.0
        driver = ("auth_token", "sync_url", "sync_interval")
        kwargs.update((name, v) for name in driver if (v := getattr(self, name)) is not None)
        return kwargs


def make_options(database: str, **knobs: Any) -> LibsqlOptions:
    """The settings of ``database`` (a file, ``:memory:``, a server URL) with ``knobs``, each
    checked against :data:`SPEC`, and the mode's rules (``InvalidStoreURL`` /
    ``InvalidStoreOption`` naming the problem, never the token)."""
    if not isinstance(database, str) or not database:
        shown = redact_url(database) if isinstance(database, str) else repr(database)
        raise InvalidStoreURL(f"database must be a file, ':memory:' or a server URL, not {shown}")
    options = LibsqlOptions(database, **SPEC.knob_values(knobs))
    if options.mode == "server":
        check_server(database, "database")
        local = ("busy_timeout_ms", "synchronous", "sync_url")  # sync_interval needs sync_url
        given = [name for name in local if getattr(options, name) != SPEC.defaults[name]]
        if given:
            raise InvalidStoreOption(
                f"{', '.join(given)}: for a local file or replica only; a libSQL server "
                "manages its own locking, durability and replication"
            )
    elif "://" in database:
        raise InvalidStoreURL(
            f"database {redact_url(database)} is neither a local file nor a "
            "libsql://, https:// or http:// server URL"
        )
    elif options.sync_url is not None and options.in_memory:
        raise InvalidStoreOption("an embedded replica needs a local file, not ':memory:'")
    elif options.auth_token is not None and options.sync_url is None:
        raise InvalidStoreOption(
            "auth_token is for a libSQL server or a replica's sync_url; a local file takes none"
        )
    return options
