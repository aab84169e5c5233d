"""``store_exists(url)``: whether a MongoDB store exists at ``url`` (creates nothing).

The plugin declares it as its ``exists`` hook; harel-core's registry calls it for
``open_store(url, create=False)`` (the CLI's read-only commands): a read of the schema record
in the ``?db=`` database (and, when it is missing, of one ``executions`` document).  Reads
create neither a database nor a collection.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pymongo
from harel.store.author import connect_with_retry, drive

from harel_store_mongo._base import MongoStoreBase
from harel_store_mongo._calls import issue
from harel_store_mongo._errors import translate
from harel_store_mongo._operations import exists_plan
from harel_store_mongo._options import MongoOptions
from harel_store_mongo._spec import SPEC


def store_exists(url: str, **knobs: Any) -> bool:
    """Whether the database ``url`` names holds a harel store.  Errors: InvalidStoreURL,
    StoreUnavailable (server unreachable, after the retries)."""
    arguments, retry = SPEC.open_args(url, knobs)
    return connect_with_retry(partial(_probe, MongoOptions(**arguments)), **retry)


def _probe(options: MongoOptions) -> bool:
    with translate(options.where):
        client: Any = pymongo.MongoClient(options.driver_uri, **options.client_kwargs())
    try:
        database = MongoStoreBase._adopted(client, options)._database
        with translate(options.where):
            return drive(exists_plan(), partial(issue, database))
    finally:
        client.close()
