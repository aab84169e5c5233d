"""Conformance-kit support: a fresh DynamoDB table per harness.

``DynamoDBHarness(endpoint_url=...)`` hands the kit stores over one new table (created by the
first store opened); every ``open_sync()`` / ``open_async()`` returns a new store object (its
own client) over it.  ``url()`` names the table and endpoint for a fresh interpreter,
``footprint()`` scans the table for what belongs to one execution, and ``destroy()`` closes
what the harness opened and deletes the table.
"""

from __future__ import annotations

import contextlib
import uuid
import weakref
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote, urlencode, urlsplit

from harel.conformance.harness import RawSide, RawSideCommit, StoreHarness
from harel.store.author import PreparedEmit
from harel.store.contract import Capabilities, TimerOp

from harel_store_dynamodb._client import endpoint_of
from harel_store_dynamodb._items import (
    mark_item,
    outbox_entry,
    read_relay_entries,
    relay_label,
    step_item,
    timer_item,
)
from harel_store_dynamodb._options import DynamoOptions, make_options
from harel_store_dynamodb._schema import (
    EXE_SK,
    G1P,
    G1S,
    OUTBOX,
    PK,
    SK,
    SPAWNS,
    exe_key,
    index_kind,
    index_partition,
)
from harel_store_dynamodb._seq import CLOCK, relay_pk, unpacked_seq
from harel_store_dynamodb._spec import CAPABILITIES, SPEC
from harel_store_dynamodb._values import n, opt_str, s
from harel_store_dynamodb.aio import AsyncDynamoDBStore
from harel_store_dynamodb.sync import DynamoDBStore, open_client

LOST_REPLY_TIMEOUT = 1.0
"""``request_timeout`` of the stores the lost-reply tests open through the fault proxy."""


def new_table_name(prefix: str = "harel-kit") -> str:
    """A table name no other run uses."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


class DynamoDBHarness(StoreHarness):
    """One new table as the kit's dataset (created empty by the first store opened)."""

    fast_stateful_examples: ClassVar[int | None] = 10
    """moto answers each request in milliseconds: 25 stateful examples took 42-51 s per
    flavour of ``make test``; 10 (of 30 random steps each) per flavour there, the whole
    ``thorough`` profile in ``make conformance-thorough``."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(
        self,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        local: bool | str = True,
        table: str | None = None,
        profile: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        index_shards: int | None = None,
    ) -> None:
        options = make_options(
            table or new_table_name(),
            region=region,
            endpoint_url=endpoint_url,
            local=local,
            create_table=True,
            profile=profile,
            index_shards=index_shards,
            aws_access_key_id=aws_access_key_id,
            aws_secret_access_key=aws_secret_access_key,
        )
        endpoint = endpoint_of(options)
        if options.local == "moto":  # resolved once: other processes reach this server
            options = replace(options, endpoint_url=endpoint, local="true")
        self.options: DynamoOptions = options
        self.table = options.table
        self._sync: weakref.WeakSet[DynamoDBStore] = weakref.WeakSet()
        self._async: weakref.WeakSet[AsyncDynamoDBStore] = weakref.WeakSet()
        self._admin: Any = None

    def store_knobs(self) -> dict[str, Any]:
        """Keyword arguments that open a store over this harness's table."""
        o = self.options
        knobs: dict[str, Any] = {
            "region": o.region,
            "endpoint_url": o.endpoint_url,
            "local": o.local != "false",
            "create_table": True,
            "profile": o.profile,
            "index_shards": o.index_shards,
        }
        if o.aws_access_key_id is not None:
            knobs["aws_access_key_id"] = o.aws_access_key_id
            knobs["aws_secret_access_key"] = o.aws_secret_access_key
        return knobs

    def open_sync(self) -> DynamoDBStore:
        """A new ``DynamoDBStore`` (its own client) over the harness table."""
        store = DynamoDBStore(self.table, **self.store_knobs())
        self._sync.add(store)
        return store

    async def open_async(self) -> AsyncDynamoDBStore:
        """A new ``AsyncDynamoDBStore`` (its own client) over the harness table."""
        store = await AsyncDynamoDBStore.open(self.table, **self.store_knobs())
        self._async.add(store)
        return store

    def server_address(self) -> tuple[str, int] | None:
        """The (host, port) of the DynamoDB endpoint (``None`` for AWS itself, reached by
        https: the kit's lost-reply proxy speaks plain TCP to an http endpoint)."""
        endpoint = self.options.endpoint_url
        if endpoint is None:
            return None
        parts = urlsplit(endpoint)
        if parts.scheme != "http" or parts.hostname is None:
            return None
        return parts.hostname, parts.port or 80

    def _knobs_at(self, host: str, port: int) -> dict[str, Any]:
        """The store knobs with the endpoint moved to ``host:port``, short timeouts (a lost
        answer is resent within a couple of seconds) and no hidden botocore retries."""
        return {
            **self.store_knobs(),
            "endpoint_url": f"http://{host}:{port}",
            "request_timeout": LOST_REPLY_TIMEOUT,
            "max_attempts": 1,
        }

    def open_sync_at(self, host: str, port: int) -> DynamoDBStore:
        """A new sync store over the harness table, talking to ``host:port`` (the kit's
        fault proxy in front of :meth:`server_address`)."""
        store = DynamoDBStore(self.table, **self._knobs_at(host, port))
        self._sync.add(store)
        return store

    async def open_async_at(self, host: str, port: int) -> AsyncDynamoDBStore:
        """The async twin of :meth:`open_sync_at`."""
        store = await AsyncDynamoDBStore.open(self.table, **self._knobs_at(host, port))
        self._async.add(store)
        return store

    def url(self) -> str:
        """``dynamodb://[KEY:SECRET@]TABLE?region=...&endpoint_url=...&local=true&create_table=true``."""
        o = self.options
        query: dict[str, str] = {}
        if o.region_name:
            query["region"] = o.region_name
        if o.endpoint_url:
            query["endpoint_url"] = o.endpoint_url
        if o.local != "false":
            query["local"] = "true"
        if o.profile:
            query["profile"] = o.profile
        query["create_table"] = "true"
        auth = ""
        key, secret = o.aws_access_key_id, o.aws_secret_access_key
        if key is not None and secret is not None:
            auth = f"{quote(key, safe='')}:{quote(secret, safe='')}@"
        return f"dynamodb://{auth}{self.table}?{urlencode(query)}"

    def _client(self) -> Any:
        if self._admin is None:
            self._admin = open_client(self.options, self.options.endpoint_url)
        return self._admin

    def scan(self) -> list[dict[str, Any]]:
        """Every item of the table (a consistent scan; tests only)."""
        client = self._client()
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"TableName": self.table, "ConsistentRead": True}
        while True:
            reply = client.scan(**params)
            items.extend(reply.get("Items", []))
            start = reply.get("LastEvaluatedKey")
            if not start:
                return items
            params["ExclusiveStartKey"] = start

    def footprint(self, execution_id: str) -> list[str]:
        """Every record the table holds for ``execution_id`` (scanned, not read via the store)."""
        labels: list[str] = []
        own = "x:" + execution_id
        for item in self.scan():
            pk, sk = item["pk"]["S"], item["sk"]["S"]
            if pk == own:
                if sk == EXE_SK:
                    labels.append("execution")
                elif sk[:2] in ("p:", "P:"):
                    labels.append(f"processed:{opt_str(item, 'ev')}")
                elif sk[:2] in ("t:", "T:"):
                    labels.append(f"timer:{opt_str(item, 'ph')}")
                elif sk.startswith("x:"):
                    labels.append(f"trace:{int(item['i']['N'])}")
                else:
                    labels.append(f"unknown:{sk}")
                continue
            kind = index_kind(item.get("g1p", {}).get("S", ""))
            if kind == OUTBOX:
                labels.extend(
                    f"outbox:{seq}"
                    for seq, _slot, entry in read_relay_entries(item)
                    if opt_str(entry, "t") == execution_id
                )
            elif kind == SPAWNS and opt_str(item, "pa") == execution_id:
                labels.extend(f"spawn:{seq}" for seq, _slot, _entry in read_relay_entries(item))
        return labels

    def raw_commit(self) -> Callable[[str, int, str], None]:
        """The benchmarks' raw write: one conditional ``UpdateItem`` of the execution item's
        document and version, on a new client with the stores' settings."""
        client = open_client(self.options, self.options.endpoint_url)

        def write(execution_id: str, version: int, document: str) -> None:
            client.update_item(TableName=self.table, **_raw_update(execution_id, version, document))

        return write

    def raw_side_commit(self) -> RawSideCommit:
        """The benchmarks' raw write with side rows: ONE ``TransactWriteItems`` of the raw
        ``UpdateItem``, an outbox item targeted at the execution, the dedupe mark, the timer and
        the trace step (the store's item layouts; no ring trim, no receipt, no listing keys)."""
        client = open_client(self.options, self.options.endpoint_url)
        table = self.table

        def write(execution_id: str, version: int, document: str, side: RawSide) -> None:
            base = CLOCK.next()
            seq = unpacked_seq(base, 0)
            entry = outbox_entry(seq, PreparedEmit(execution_id, f"raw-{seq}", side.emit))
            relay = {
                PK: s(relay_pk(base)),
                SK: s("o:0000"),
                "e": {"M": {"0": entry}},
                "n": n(1),
                G1P: s(index_partition(OUTBOX, 0)),
                G1S: s(relay_label(seq)),
                "tg": {"SS": [execution_id]},
            }
            timer = TimerOp.schedule(side.timer_path, side.fire_at)
            items = [
                relay,
                mark_item(execution_id, side.event_id, side.now),
                timer_item(execution_id, timer),
                step_item(execution_id, side.trace_index, side.trace),
            ]
            client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": table,
                            **_raw_update(execution_id, version, document),
                        }
                    },
                    *({"Put": {"TableName": table, "Item": item}} for item in items),
                ]
            )

        return write

    def destroy(self) -> None:
        """Close every sync store still open through this harness and delete the table."""
        for store in list(self._sync):
            store.close()
        client = self._client()
        with contextlib.suppress(Exception):
            client.delete_table(TableName=self.table)
        client.close()
        self._admin = None

    def describe(self) -> str:
        """``dynamodb <table> at <endpoint>`` (no credentials)."""
        return f"dynamodb {self.options.describe()}"


def _raw_update(execution_id: str, version: int, document: str) -> dict[str, Any]:
    """The raw CAS of the document: ``SET d, v`` under ``v = version``."""
    return {
        "Key": exe_key(execution_id),
        "UpdateExpression": "SET d = :d, v = :n",
        "ConditionExpression": "v = :v",
        "ExpressionAttributeValues": {
            ":d": {"S": document},
            ":n": {"N": str(version + 1)},
            ":v": {"N": str(version)},
        },
    }


def harness_from_url(url: str, workdir: Path) -> DynamoDBHarness:
    """A harness over a NEW table reached the way ``url`` says (endpoint, region, credentials).

    The URL's own table is never touched: isolation means a fresh, empty table.
    """
    _parsed, knobs, _retry = SPEC.parse_url(url)
    return DynamoDBHarness(
        endpoint_url=knobs.get("endpoint_url"),
        region=knobs.get("region"),
        local=knobs.get("local", "false"),
        profile=knobs.get("profile"),
        aws_access_key_id=knobs.get("aws_access_key_id"),
        aws_secret_access_key=knobs.get("aws_secret_access_key"),
        index_shards=knobs.get("index_shards"),
    )
