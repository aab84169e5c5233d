"""The single-table layout: keys, attribute names, the two GSIs, and the pure schema decision.

One table (``pk`` S, ``sk`` S), on-demand billing, two sparse overloaded GSIs::

    pk                 sk                 what
    x:<execution id>   x                  the execution (document, version, summary, trace cursor)
    x:<execution id>   x:<idx, 16 hex>    one trace step
    x:<execution id>   p:<event id>       a dedupe mark (P:<sha256> when the id is long)
    x:<execution id>   t:<path>           an armed timer (T:<sha256> when the path is long)
    q:<base, 12 hex>   o:<j> | O:<c>      outbox entries of one commit (one each, or packed)
    q:<base, 12 hex>   s:<j> | S:<c>      spawn intents of one commit (one each, or packed)
    x:<execution id>   w                  its work row (claims; x: / w: the untargeted group)
    b:<base, 12 hex>   W:<n>              a touch bundle of one fan-out commit (claims)
    meta               schema             the layout version of this table and its writer

    GSI harel-g1 (g1p, g1s)   L.<n>/<id>: listing   T.<n>/<fire_at key>: due timers
                              O.<n>/<seq>: outbox   S.<n>/<seq>: spawns   P.<n>/<at>: marks
                              W<priority>.<n>/<ready_at key>: work rows (claims)
                              (n = the shard, 0 <= n < index_shards, see shard_of)
    GSI harel-g2 (g2p, g2s)   d:<sha256(definition_id)>/<id>: listing by definition

Everything one execution owns lives in its partition, so ``load_for_event`` is one
``BatchGetItem``, ``read_trace`` one ``Query`` and ``purge`` finds it with a consistent
``Query``.  Relay entries live in a partition derived from their ``seq`` so an ack is one
request.  The GSIs project only what the sweeps and the listing read (never the document).
"""

from __future__ import annotations

import hashlib
from typing import Any

from harel.store.errors import SchemaVersionError

SCHEMA_VERSION = 4
"""Bump (with an upgrade step in :mod:`._table`) whenever the layout above changes.

* 1 — the execution item carries the token of the commit that wrote it in ``ct``;
* 2 — commit *receipts*: the token of the commit that wrote version ``v`` lives in
  ``k<v % RECEIPTS>`` (the last :data:`RECEIPTS` commits are told apart, so a commit whose
  answer was lost can tell that it landed even after later commits); the meta item records
  ``written_by``.  Upgrade from 1: each execution item's ``ct`` becomes its version's receipt.
* 3 — sharded GSI1 partitions: ``L.<n>``, ``T.<n>``, ``O.<n>``, ``S.<n>``, ``P.<n>`` instead of
  the constant ``L``, ``T``, ``O``, ``S``, ``P`` (``n`` = :func:`shard_of` the execution id,
  among ``index_shards`` shards recorded on the meta item).  Upgrade from 2 (and 1): the shard
  count is recorded first, then every index item moves to its shard, then the version.
* 4 — claims: one work row per group of due work (``x:<id>``/``w``; the untargeted group
  ``x:``/``w``), indexed in GSI1 under ``W<priority>.<n>`` by ready time (:mod:`._work`).
  Upgrade from 3 (and older): the work rows are backfilled from the ``T``/``O``/``S`` shards.
"""
UPGRADES = frozenset({1, 2, 3})
"""Layout versions this release upgrades in place on open."""
DISTRIBUTION = "harel-store-dynamodb"

PK, SK = "pk", "sk"
G1P, G1S, G2P, G2S = "g1p", "g1s", "g2p", "g2s"
GSI1, GSI2 = "harel-g1", "harel-g2"

EXE_SK = "x"
"""Sort key of the execution item; trace steps sort right after it (``x:<idx>``)."""
TRACE_RANGE = ("x", "x;")
"""``BETWEEN`` bounds covering the execution item and all its trace steps (``;`` follows ``:``)."""
META_KEY = {PK: {"S": "meta"}, SK: {"S": "schema"}}
RECEIPTS = 8
"""Commit receipts kept on the execution item: the token of the commit that wrote version ``v``
sits in attribute ``k<v % RECEIPTS>``, so a commit whose answer was lost can tell whether it
landed even after up to ``RECEIPTS - 1`` later commits."""


def receipt_attribute(version: int) -> str:
    """The attribute holding the token of the commit that wrote ``version``."""
    return f"k{version % RECEIPTS}"


LISTING, TIMERS, OUTBOX, SPAWNS, MARKS = "L", "T", "O", "S", "P"
"""The kinds of GSI1 entries; each is spread over ``index_shards`` partitions."""
INDEX_KINDS = (LISTING, TIMERS, OUTBOX, SPAWNS, MARKS)
DEFAULT_INDEX_SHARDS = 4
"""Shards per GSI1 kind on a new table.  A DynamoDB partition takes about 1,000 writes per
second; every commit writes its listing entry (and timers, relay entries, marks), so one
constant partition capped a whole deployment near 1,000 commits/s.  Four shards lift that to
about 4,000 while a sweep or a listing page costs four small queries instead of one (the
queries of an idle relay are what a larger count multiplies)."""
MAX_INDEX_SHARDS = 256


def shard_of(key: str, shards: int) -> int:
    """The shard, in ``range(shards)``, of everything indexed for ``key`` (an execution id):
    a stable hash (BLAKE2b, the same in every process and release), not Python's ``hash``."""
    if shards == 1:
        return 0
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def index_partition(kind: str, shard: int) -> str:
    """The GSI1 partition key of ``kind`` entries of ``shard`` (``"T.3"``)."""
    return f"{kind}.{shard}"


def index_partitions(kind: str, shards: int) -> list[str]:
    """Every GSI1 partition of ``kind`` (the partitions a sweep fans out over)."""
    return [f"{kind}.{shard}" for shard in range(shards)]


def index_kind(partition: str) -> str:
    """The kind (``"T"``) of a GSI1 partition key (``"T.3"``, or layout 2's ``"T"``)."""
    return partition.split(".", 1)[0]


INLINE_KEY_BYTES = 1000
"""Event ids and timer paths up to this many UTF-8 bytes are sort keys as they are; longer ones
are hashed (and compared exactly through the stored attribute)."""

PROJECTED = (
    # listing summary
    "id",
    "v",
    "di",
    "st",
    "oc",
    "ap",
    "pa",
    "ua",
    # timers
    "xi",
    "ph",
    "fa",
    # relay items
    "e",
    "tg",
)


def table_definition(table: str) -> dict[str, Any]:
    """``CreateTable`` arguments for the layout (on-demand billing)."""
    key_attrs = (PK, SK, G1P, G1S, G2P, G2S)
    return {
        "TableName": table,
        "AttributeDefinitions": [
            {"AttributeName": name, "AttributeType": "S"} for name in key_attrs
        ],
        "KeySchema": [
            {"AttributeName": PK, "KeyType": "HASH"},
            {"AttributeName": SK, "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": index,
                "KeySchema": [
                    {"AttributeName": hash_key, "KeyType": "HASH"},
                    {"AttributeName": range_key, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(PROJECTED)},
            }
            for index, hash_key, range_key in ((GSI1, G1P, G1S), (GSI2, G2P, G2S))
        ],
        "BillingMode": "PAY_PER_REQUEST",
    }


def exe_pk(execution_id: str) -> dict[str, str]:
    """The partition key of everything an execution owns."""
    return {"S": "x:" + execution_id}


def exe_key(execution_id: str) -> dict[str, dict[str, str]]:
    """The key of the execution item."""
    return {PK: exe_pk(execution_id), SK: {"S": EXE_SK}}


def _child_sk(prefix: str, hashed_prefix: str, value: str) -> str:
    raw = value.encode("utf-8")
    if len(raw) <= INLINE_KEY_BYTES:
        return prefix + value
    return hashed_prefix + hashlib.sha256(raw).hexdigest()


def mark_key(execution_id: str, event_id: str) -> dict[str, dict[str, str]]:
    """The key of a dedupe mark."""
    return {PK: exe_pk(execution_id), SK: {"S": _child_sk("p:", "P:", event_id)}}


def timer_key(execution_id: str, path: str) -> dict[str, dict[str, str]]:
    """The key of a timer."""
    return {PK: exe_pk(execution_id), SK: {"S": _child_sk("t:", "T:", path)}}


def path_is_hashed(path: str) -> bool:
    """Whether a timer path is too long to be its own sort key (then compared by attribute)."""
    return len(path.encode("utf-8")) > INLINE_KEY_BYTES


def trace_sk(index: int) -> str:
    """Sort key of trace step ``index`` (fixed-width hex, so keys sort by index)."""
    return f"x:{index:016x}"


def definition_partition(definition_id: str) -> str:
    """GSI2 partition of a definition: a digest, so any length works (exactness by filter)."""
    return "d:" + hashlib.sha256(definition_id.encode("utf-8")).hexdigest()[:40]


def layout_problems(description: dict[str, Any]) -> list[str]:
    """What is wrong with a described table for this layout (empty when it fits)."""
    problems: list[str] = []
    keys = {(k["AttributeName"], k["KeyType"]) for k in description.get("KeySchema", [])}
    if keys != {(PK, "HASH"), (SK, "RANGE")}:
        problems.append(f"key schema {sorted(keys)} is not (pk HASH, sk RANGE)")
    indexes = {gsi.get("IndexName"): gsi for gsi in description.get("GlobalSecondaryIndexes", [])}
    for index, hash_key, range_key in ((GSI1, G1P, G1S), (GSI2, G2P, G2S)):
        gsi = indexes.get(index)
        if gsi is None:
            problems.append(f"global secondary index {index} is missing")
            continue
        got = {(k["AttributeName"], k["KeyType"]) for k in gsi.get("KeySchema", [])}
        if got != {(hash_key, "HASH"), (range_key, "RANGE")}:
            problems.append(f"index {index} is keyed {sorted(got)}, not ({hash_key}, {range_key})")
        projection = gsi.get("Projection", {})
        kind = projection.get("ProjectionType")
        if kind == "INCLUDE":
            missing = set(PROJECTED) - set(projection.get("NonKeyAttributes", []))
            if missing:
                problems.append(f"index {index} does not project {sorted(missing)}")
        elif kind != "ALL":
            problems.append(f"index {index} projects {kind}, not INCLUDE/ALL")
    return problems


def is_active(description: dict[str, Any]) -> bool:
    """The table and every GSI are ACTIVE (writes and index queries may start)."""
    if description.get("TableStatus") != "ACTIVE":
        return False
    return all(
        gsi.get("IndexStatus", "ACTIVE") == "ACTIVE"
        for gsi in description.get("GlobalSecondaryIndexes", [])
    )


def stored_shards(item: dict[str, Any] | None) -> int | None:
    """The ``index_shards`` a meta item records (``None``: not recorded yet, layout < 3)."""
    if item is None or "index_shards" not in item:
        return None
    try:
        shards = int(item["index_shards"]["N"])
    except (KeyError, TypeError, ValueError):
        shards = 0
    if not 1 <= shards <= MAX_INDEX_SHARDS:
        raise SchemaVersionError(
            f"the meta item of this DynamoDB table records index_shards={item['index_shards']!r}, "
            f"not an int in [1, {MAX_INDEX_SHARDS}]: the table was not written by harel"
        )
    return shards


def stored_layout(item: dict[str, Any] | None) -> tuple[int | None, str | None]:
    """The layout version and ``written_by`` release a meta item records (``None``: no item)."""
    if item is None:
        return None, None
    try:
        version = int(item["schema"]["N"])
    except (KeyError, TypeError, ValueError):
        raise SchemaVersionError(
            "the meta item of this DynamoDB table holds no layout version: the table was not "
            "written by harel; use another table"
        ) from None
    written_by = item.get("written_by", {}).get("S")
    return version, written_by if isinstance(written_by, str) else None
