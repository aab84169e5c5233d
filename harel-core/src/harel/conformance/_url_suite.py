"""The suite module ``run_conformance`` (and ``harel conformance URL``) runs.

Its ``harel_harness`` comes from the plugin's ``--harel-store-url`` option.
"""

from __future__ import annotations

from harel.conformance.suite import ConformanceSuite


class TestStoreConformance(ConformanceSuite):
    """The whole kit against the store named by ``--harel-store-url``."""
