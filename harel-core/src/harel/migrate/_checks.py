"""Checks made before a migration or a verification touches anything."""

from __future__ import annotations

from harel.migrate._report import MigrationError
from harel.store.contract import ExecutionStore


def require_records(store: ExecutionStore, role: str) -> None:
    """Raise :class:`MigrationError` when ``store`` predates ``export_execution`` /
    ``import_execution`` (a backend built for an older harel-core)."""
    for method in ("export_execution", "import_execution"):
        if not callable(getattr(store, method, None)):
            raise MigrationError(
                f"the {role} store ({type(store).__name__}) has no {method}(): its backend "
                "predates execution records; upgrade that backend's distribution"
            )
