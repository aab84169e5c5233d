"""The whole conformance kit against TutorialStore / AsyncTutorialStore (``make test`` runs it
with ``--harel-strict``: a capability the harness does not declare fails instead of skipping)."""

from __future__ import annotations

from typing import ClassVar

from harel.conformance import ConformanceSuite


class TestTutorialConformance(ConformanceSuite):
    """Every kit test; the tutorial store declares no deviation."""

    expected_failures: ClassVar[dict[str, str]] = {}
