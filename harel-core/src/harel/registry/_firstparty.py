"""The first-party backends: which distribution provides which name, schemes and classes.

Only what the ``pip install`` hints need, and which names and schemes a third-party plugin may
not take over unless the user prefers it (``HAREL_PREFER_PLUGINS``); everything else about a
backend comes from its own plugin.
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


def _entry(name: str, schemes: str, prefix: str, distribution: str = "") -> FirstParty:
    dist = distribution or f"harel-store-{name}"
    return FirstParty(name, dist, tuple(schemes.split()), f"{prefix}Store", f"Async{prefix}Store")


FIRST_PARTY: dict[str, FirstParty] = {
    entry.name: entry
    for entry in (
        _entry("memory", "memory", "Dict", "harel-core"),
        _entry("sqlite", "sqlite", "Sqlite"),
        _entry("libsql", "libsql libsql+file", "Libsql"),
        _entry("rqlite", "rqlite rqlites", "Rqlite"),
        _entry("postgres", "postgres postgresql", "Postgres"),
        _entry("redis", "redis rediss", "Redis"),
        _entry("mongo", "mongodb mongodb+srv", "Mongo"),
        _entry("dynamodb", "dynamodb", "DynamoDB"),
    )
}


def first_party_schemes() -> set[str]:
    """Every scheme a first-party backend handles."""
    return {scheme for entry in FIRST_PARTY.values() for scheme in entry.schemes}


def first_party_for_scheme(scheme: str) -> FirstParty | None:
    """The first-party backend that handles ``scheme``, if any."""
    return next((entry for entry in FIRST_PARTY.values() if scheme in entry.schemes), None)
