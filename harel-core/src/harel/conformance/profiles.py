"""The kit's hypothesis profiles: ``fast`` (every ``make test``) and ``thorough``.

``HYPOTHESIS_PROFILE`` selects one (default ``fast``).  The kit's stateful test always uses
the selected profile; the plugin also loads it globally when the variable is set.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

FAST = "fast"
THOROUGH = "thorough"
ENV_VAR = "HYPOTHESIS_PROFILE"

_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def register_profiles() -> None:
    """Register ``fast`` and ``thorough`` (idempotent)."""
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
        THOROUGH,
        max_examples=500,
        stateful_step_count=60,
        deadline=None,
        suppress_health_check=_SUPPRESSED,
    )


def selected_profile_name() -> str:
    """The profile named by ``HYPOTHESIS_PROFILE``, ``fast`` when unset."""
    return os.environ.get(ENV_VAR) or FAST


def kit_settings() -> settings:
    """Settings for the kit's own hypothesis tests (the selected profile)."""
    register_profiles()
    return settings.get_profile(selected_profile_name())
