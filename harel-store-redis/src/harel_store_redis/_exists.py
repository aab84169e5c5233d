"""``store_exists(url)``: whether a Redis store exists at ``url`` (creates nothing).

The plugin declares it as its ``exists`` hook; harel-core's registry calls it for
``open_store(url, create=False)`` (the CLI's read-only commands): one ``EXISTS`` of the
layout keys under the URL's prefix (on a cluster, where they may live in two slots, one per
key); no script is loaded, no key written.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import redis
import redis.cluster
from harel.store.author import connect_with_retry, drive
from redis.backoff import NoBackoff
from redis.retry import Retry

from harel_store_redis._errors import translate
from harel_store_redis._options import RedisOptions, open_options
from harel_store_redis._plan import exists_plan
from harel_store_redis._schema import Keys


def store_exists(url: str, **knobs: Any) -> bool:
    """Whether the prefix ``url`` names holds a harel key layout.  Errors: InvalidStoreURL,
    StoreUnavailable (server unreachable, after the retries)."""
    options, retry = open_options(url, knobs)
    return connect_with_retry(partial(_probe, options), **retry)


def _probe(options: RedisOptions) -> bool:
    keys = Keys(options.prefix_bytes)
    client: Any
    with translate(options.where):  # a cluster client connects when it is built
        if options.cluster:
            client = redis.cluster.RedisCluster(
                **options.client_kwargs(), retry=Retry(NoBackoff(), 0)
            )
        else:
            client = redis.Redis(**options.client_kwargs(), retry=Retry(NoBackoff(), 0))
    try:
        send: Any = client.execute_command
        with translate(options.where):
            plan = exists_plan(keys, cluster=options.cluster)
            return drive(plan, lambda command: send(*command.wire))
    finally:
        client.close()
