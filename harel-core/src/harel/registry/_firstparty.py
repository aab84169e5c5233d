"""The first-party backends: which distribution provides which name, schemes and classes.

Only what the ``pip install`` hint needs (``from harel import SqliteStore`` and an unknown
scheme name the distribution to install), and which names and schemes a third-party plugin
may not take over unless the user prefers it (``HAREL_PREFER_PLUGINS``).  Everything else
about a backend (classes, capabilities, legacy variables) comes from its own plugin.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FirstParty:
    """A backend shipped by the harel project."""

    name: str
    distribution: str
    schemes: tuple[str, ...]
    store_class: str
    async_store_class: str

    @property
    def pip_line(self) -> str:
        """The command that installs it."""
        return f"pip install {self.distribution}"


FIRST_PARTY: dict[str, FirstParty] = {
    entry.name: entry
    for entry in (
        FirstParty("memory", "harel-core", ("memory",), "DictStore", "AsyncDictStore"),
        FirstParty("sqlite", "harel-store-sqlite", ("sqlite",), "SqliteStore", "AsyncSqliteStore"),
        FirstParty(
            "libsql",
            "harel-store-libsql",
            ("libsql", "libsql+file"),
            "LibsqlStore",
            "AsyncLibsqlStore",
        ),
        FirstParty(
            "rqlite",
            "harel-store-rqlite",
            ("rqlite", "rqlites"),
            "RqliteStore",
            "AsyncRqliteStore",
        ),
        FirstParty(
            "postgres",
            "harel-store-postgres",
            ("postgres", "postgresql"),
            "PostgresStore",
            "AsyncPostgresStore",
        ),
        FirstParty(
            "redis", "harel-store-redis", ("redis", "rediss"), "RedisStore", "AsyncRedisStore"
        ),
        FirstParty(
            "mongo",
            "harel-store-mongo",
            ("mongodb", "mongodb+srv"),
            "MongoStore",
            "AsyncMongoStore",
        ),
        FirstParty(
            "dynamodb",
            "harel-store-dynamodb",
            ("dynamodb",),
            "DynamoDBStore",
            "AsyncDynamoDBStore",
        ),
    )
}


def first_party_for_scheme(scheme: str) -> FirstParty | None:
    """The first-party backend that handles ``scheme``, if any."""
    for entry in FIRST_PARTY.values():
        if scheme in entry.schemes:
            return entry
    return None


def first_party_for_class(class_name: str) -> tuple[FirstParty, bool] | None:
    """``(backend, is_async)`` for a first-party class name such as ``"AsyncSqliteStore"``."""
    for entry in FIRST_PARTY.values():
        if class_name == entry.store_class:
            return entry, False
        if class_name == entry.async_store_class:
            return entry, True
    return None
