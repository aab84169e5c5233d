"""The engine's environment settings, read at call time (engine.md §5.4).

Runners never read the environment; the CLI and the worker build an :class:`EngineConfig`
with :meth:`EngineConfig.from_env` and pass its values explicitly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harel.store.contract import DEFAULT_TRACE_MAX

TRUTHY = frozenset({"1", "true", "yes", "on"})


class ConfigError(ValueError):
    """An environment variable holds a value the engine cannot use (the message names it)."""


def env_flag(value: str | None) -> bool:
    """``1/true/yes/on`` in any case (surrounding blanks ignored) is true; anything else false."""
    return value is not None and value.strip().lower() in TRUTHY


def env_int(env: Mapping[str, str], name: str, default: int) -> int:
    """The integer in ``env[name]`` (``default`` when unset or blank); rejects anything else."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number >= 0, got {raw!r}") from None
    if value < 0:
        raise ConfigError(f"{name} must be a whole number >= 0, got {raw!r}")
    return value


@dataclass(frozen=True)
class EngineConfig:
    """``STM_TRACE`` (flag), ``STM_TRACE_MAX`` (ring size, default 200), ``STM_DEFINITIONS_DIR``."""

    trace: bool = False
    trace_max: int = DEFAULT_TRACE_MAX
    definitions_dir: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> EngineConfig:
        """Read the settings now (``os.environ`` by default); :class:`ConfigError` if invalid."""
        env = os.environ if env is None else env
        directory = env.get("STM_DEFINITIONS_DIR", "").strip()
        return cls(
            trace=env_flag(env.get("STM_TRACE")),
            trace_max=env_int(env, "STM_TRACE_MAX", DEFAULT_TRACE_MAX),
            definitions_dir=Path(directory) if directory else None,
        )
