"""The statechart engine: definitions, the DSL, the pure engine and the durable runners.

``definition_from_dsl`` compiles a machine; :class:`DurableRunner` (sync) and
:class:`AsyncDurableRunner` (async) drive executions durably through a store.
"""

from harel.engine.actions import ActionContext
from harel.engine.aio import AsyncDurableRunner
from harel.engine.config import ConfigError, EngineConfig
from harel.engine.definition import Definition
from harel.engine.dsl import (
    DslError,
    definition_from_dsl,
    definition_from_dsl_file,
    definitions_from_dir,
    definitions_from_dsl,
)
from harel.engine.plan import UnknownDefinition
from harel.engine.runner import DurableRunner
from harel.engine.worker import Worker

__all__ = [
    "ActionContext",
    "AsyncDurableRunner",
    "ConfigError",
    "Definition",
    "DslError",
    "DurableRunner",
    "EngineConfig",
    "UnknownDefinition",
    "Worker",
    "definition_from_dsl",
    "definition_from_dsl_file",
    "definitions_from_dir",
    "definitions_from_dsl",
]
