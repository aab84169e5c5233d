"""One rule for every durable backend's schema (layout) version, and one message for it.

A backend stores its layout version (and the release that wrote it) beside its data, and on
open asks :func:`schema_verdict` what to do: create the layout in an empty store, use it as it
is, or upgrade it in place.  A store written by a newer release is refused with
:class:`~harel.store.errors.SchemaVersionError` naming both versions and the release to
install, before anything is written.
"""

from __future__ import annotations

from collections.abc import Collection
from importlib import metadata
from typing import Literal

from harel.store.errors import SchemaVersionError

SchemaVerdict = Literal["create", "ready", "upgrade"]
"""What an open must do with the stored layout: create it, use it as it is, or upgrade it."""


def release_of(distribution: str) -> str:
    """``"harel-store-redis 0.3.0"``: the installed release of ``distribution`` (its name alone
    when it is not installed as a distribution, e.g. running from a source tree)."""
    try:
        return f"{distribution} {metadata.version(distribution)}"
    except metadata.PackageNotFoundError:
        return distribution


def _install_hint(distribution: str, written_by: str | None) -> str:
    name, _, version = (written_by or "").partition(" ")
    if name == distribution and version:
        return f"pip install '{distribution}>={version}'"
    return f"pip install --upgrade {distribution}"


def schema_verdict(
    found: int | None,
    *,
    current: int,
    upgrades: Collection[int],
    where: str,
    distribution: str,
    written_by: str | None = None,
) -> SchemaVerdict:
    """What opening a store needs given its stored layout version (``None``: an empty store).

    ``"create"`` for an empty store, ``"ready"`` for ``current``, ``"upgrade"`` for a version
    in ``upgrades``.  Any other version raises :class:`SchemaVersionError` naming ``where``,
    both versions, the release that wrote it (``written_by``, when recorded) and the
    ``pip install`` line that reads it.
    """
    if found is None:
        return "create"
    if found == current:
        return "ready"
    if found in upgrades:
        return "upgrade"
    this = release_of(distribution)
    upgradable = ", ".join(str(v) for v in sorted(upgrades)) or "none"
    if found > current:
        writer = f"written by {written_by}" if written_by else "written by a newer release"
        raise SchemaVersionError(
            f"{where} holds layout version {found} ({writer}), but {this} reads version "
            f"{current} (and upgrades: {upgradable}); install the release that reads it: "
            f"{_install_hint(distribution, written_by)}"
        )
    raise SchemaVersionError(
        f"{where} holds layout version {found}, older than any {this} upgrades (it reads "
        f"{current} and upgrades: {upgradable}); open it once with the release that wrote it "
        "and its successors, or move the data with `harel migrate`"
    )
