"""Whether a plugin distribution was built for this harel-core, read from its metadata only."""

from __future__ import annotations

import importlib.metadata

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

CORE_DISTRIBUTION = "harel-core"
_OPERATOR_ORDER = {">=": 0, ">": 0, "~=": 1, "==": 1, "===": 1, "!=": 2, "<=": 3, "<": 3}


def core_version() -> str:
    """The installed harel-core version (the distribution's, else ``harel.__version__``)."""
    try:
        return importlib.metadata.version(CORE_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        import harel

        return harel.__version__


def incompatibility(dist: importlib.metadata.Distribution | None, version: str) -> str | None:
    """Why ``dist`` cannot run on harel-core ``version``, or ``None`` when it can.

    Reads ``Requires-Dist`` only (the plugin is not imported); a distribution that does not
    declare harel-core is given the benefit of the doubt.
    """
    name = "?" if dist is None else dist.metadata["Name"] or "?"
    if dist is None or canonicalize_name(name) == CORE_DISTRIBUTION:
        return None
    try:
        current = Version(version)
    except InvalidVersion:
        return None
    for line in dist.requires or ():
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        marker = requirement.marker
        if (
            canonicalize_name(requirement.name) != CORE_DISTRIBUTION
            or (marker is not None and not marker.evaluate({"extra": ""}))
            or requirement.specifier.contains(current, prereleases=True)
        ):
            continue
        order = sorted(
            requirement.specifier, key=lambda s: (_OPERATOR_ORDER.get(s.operator, 9), s.version)
        )
        wanted = CORE_DISTRIBUTION + ",".join(str(spec) for spec in order)
        return f"{name} {dist.version} requires {wanted}, this is {CORE_DISTRIBUTION} {version}"
    return None
