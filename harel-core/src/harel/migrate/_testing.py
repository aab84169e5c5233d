"""A test-only pause point, so a test can SIGKILL ``harel migrate`` mid-run deterministically.

With ``HAREL_MIGRATE_TEST_HOLD_AFTER=N`` in the environment, the copy loop, right after its
N-th import, writes ``harel-migrate-test: holding after N`` to stderr and blocks until stdin
closes, then exits with status 70 (an aborted run).  Unset (always, outside the tests), it does
nothing.
"""

from __future__ import annotations

import os
import sys

HOLD_AFTER = "HAREL_MIGRATE_TEST_HOLD_AFTER"
HELD = "harel-migrate-test: holding after"
ABORTED = 70


def hold_point(imported: int) -> None:
    """Block after the configured number of imports (see the module docstring)."""
    wanted = os.environ.get(HOLD_AFTER)
    if not wanted or imported != int(wanted):
        return
    sys.stderr.write(f"{HELD} {imported}\n")
    sys.stderr.flush()
    sys.stdin.read()
    raise SystemExit(ABORTED)
