"""The SQL family's shared tests (layout, upgrade, refusal, threads, records) on libSQL."""

from harel.store.common.sql.suite import *  # noqa: F403
