"""The kit's hypothesis profiles: ``fast`` (every ``make test``) and ``thorough``.

``HYPOTHESIS_PROFILE`` selects one (default ``fast``).  The kit's stateful test always uses
the selected profile; the plugin also loads it globally when the variable is set.

In URL mode (``harel conformance URL`` / ``run_conformance``) :func:`url_mode` reports a
hypothesis failure as found, without shrinking it (``HAREL_KIT_SHRINK=1`` shrinks, bounded
to :data:`URL_MAX_SHRINKS` successful shrinks instead of hypothesis' 500), and keeps the
example database in the kit's cache directory, never in ``./.hypothesis``: a rerun replays
the failing example at once.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

FAST = "fast"
THOROUGH = "thorough"
RELIABILITY = "reliability"
RELIABILITY_EXAMPLES = 5000
"""Generated inputs per flavour (sync, async) of the round-trip law in ``make reliability``:
>= 10,000 per backend."""
RELIABILITY_CANCELLATIONS = 2000
"""Cancellations per cancellation test in ``make reliability``."""
ENV_VAR = "HYPOTHESIS_PROFILE"

_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def register_profiles() -> None:
    """Register ``fast``, ``thorough`` and ``reliability`` (idempotent)."""
    settings.register_profile(
        FAST,
        max_examples=25,
        stateful_step_count=30,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=_SUPPRESSED,
    )
    settings.register_profile(
        RELIABILITY,
        max_examples=RELIABILITY_EXAMPLES,
        stateful_step_count=60,
        deadline=None,
        database=None,
        suppress_health_check=_SUPPRESSED,
    )
    settings.register_profile(
        THOROUGH,
        max_examples=500,
        stateful_step_count=60,
        deadline=None,
        suppress_health_check=_SUPPRESSED,
    )


def selected_profile_name() -> str:
    """The profile named by ``HYPOTHESIS_PROFILE``, ``fast`` when unset."""
    return os.environ.get(ENV_VAR) or FAST


URL_MAX_SHRINKS = 20
"""Successful shrinks per failing hypothesis test in URL mode when shrinking is asked for
(``HAREL_KIT_SHRINK=1``; hypothesis' own bound is 500)."""
SHRINK_VAR = "HAREL_KIT_SHRINK"
"""``1``: URL mode shrinks counterexamples (bounded); by default it reports them unshrunk."""

_OVERRIDES: dict[str, Any] = {}


def kit_settings() -> settings:
    """Settings for the kit's own hypothesis tests (the selected profile, with the URL
    mode's example database when :func:`url_mode` is active)."""
    register_profiles()
    profile = settings.get_profile(selected_profile_name())
    return settings(profile, **_OVERRIDES) if _OVERRIDES else profile


@contextlib.contextmanager
def url_mode(
    database: Path | None, *, shrink: bool = False, max_shrinks: int = URL_MAX_SHRINKS
) -> Iterator[None]:
    """Within the block: the kit's hypothesis tests keep their examples in ``database`` (a
    directory; ``None``: no database) and report a failure as found, unshrunk (a broken
    store fails in seconds instead of minutes of shrinking); with ``shrink`` they shrink, but
    stop after ``max_shrinks`` successful shrinks.  Restores everything on exit."""
    from hypothesis import Phase
    from hypothesis.database import DirectoryBasedExampleDatabase
    from hypothesis.internal.conjecture import engine

    saved_shrinks = engine.MAX_SHRINKS
    saved = dict(_OVERRIDES)
    _OVERRIDES["database"] = None if database is None else DirectoryBasedExampleDatabase(database)
    if shrink:
        engine.MAX_SHRINKS = min(saved_shrinks, max_shrinks)
    else:
        _OVERRIDES["phases"] = [phase for phase in Phase if phase is not Phase.shrink]
    try:
        yield
    finally:
        engine.MAX_SHRINKS = saved_shrinks
        _OVERRIDES.clear()
        _OVERRIDES.update(saved)


_SIZES: dict[str, dict[str, int]] = {
    FAST: {"roundtrip_examples": 40, "cancellation_rounds": 30},
    THOROUGH: {"roundtrip_examples": 500, "cancellation_rounds": 2000},
    RELIABILITY: {
        "roundtrip_examples": RELIABILITY_EXAMPLES,
        "cancellation_rounds": RELIABILITY_CANCELLATIONS,
    },
}
"""Sizes of the kit tests that are not plain hypothesis runs, per profile.

``roundtrip_examples``: generated inputs per flavour of the round-trip law, on top of its ~50
hand-picked ones (each input is one commit, one ``append_trace`` and ~10 reads with its ids);
``cancellation_rounds``: cancellations per cancellation test (fast: a few dozen, thorough and
reliability: 2000 — on SQLite about 30 s per test).
"""


def kit_size(name: str) -> int:
    """The size ``name`` for the selected profile (``fast`` sizes for a profile of your own)."""
    sizes = _SIZES.get(selected_profile_name(), _SIZES[FAST])
    return sizes[name]
