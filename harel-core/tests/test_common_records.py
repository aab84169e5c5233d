"""The store-neutral half of records (prepare_import, record_digest), schema verdicts and the
settled async writes of AsyncPlanStore."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest
from harel.model import KEEP_UNKNOWN_FIELDS, Event, Execution
from harel.store.common.plan_store import AsyncPlanStore, Op
from harel.store.common.records import prepare_import, record_digest, trim_record_trace
from harel.store.common.schema_version import schema_verdict
from harel.store.contract import ExecutionRecord, OutboxEntry, SpawnEntry
from harel.store.errors import (
    InvalidArgument,
    InvalidIdentifier,
    InvalidPayload,
    PayloadTooLarge,
    SchemaVersionError,
)


def _record(**changes: Any) -> ExecutionRecord:
    exe = Execution(id="e1", definition_id="d", version=3, context={"n": 1})
    base = ExecutionRecord(
        execution_id="e1",
        execution=exe,
        updated_at=12.5,
        processed=(("ev-b", 2.0), ("ev-a", 1.0)),
        timers=(("/b", 20.0), ("/a", 10.0)),
        outbox=(
            OutboxEntry(9, "e1", Event(id="x2", kind="k2")),
            OutboxEntry(4, "e1", Event(id="x1", kind="k1")),
        ),
        spawns=(SpawnEntry(5, "e1", "c1", "/r", {"a": 1}),),
        trace=({"index": 4, "s": 1}, {"index": 5, "s": 2}, {"index": 6, "s": 3}),
    )
    return replace(base, **changes)


def test_prepare_import_sorts_encodes_and_keeps_relay_order() -> None:
    prepared = prepare_import(_record(), trace_max=None)
    assert prepared.execution is not None
    assert prepared.execution.version == 3
    assert prepared.execution.updated_at == 12.5
    assert json.loads(prepared.execution.document)["context"] == {"n": 1}
    assert prepared.processed == (("ev-a", 1.0), ("ev-b", 2.0))
    assert prepared.timers == (("/a", 10.0), ("/b", 20.0))
    assert [emit.event_id for emit in prepared.emits] == ["x1", "x2"]  # seq order
    assert [spawn.child_id for spawn in prepared.spawns] == ["c1"]
    assert [index for index, _ in prepared.trace] == [4, 5, 6]
    assert all("index" not in json.loads(body) for _, body in prepared.trace)
    assert prepared.row_count == 1 + 2 + 2 + 2 + 1 + 3


def test_prepare_import_applies_the_ring_and_dates_undated_records() -> None:
    prepared = prepare_import(_record(updated_at=None), trace_max=2, now=99.0)
    assert [index for index, _ in prepared.trace] == [5, 6]
    assert prepared.execution is not None and prepared.execution.updated_at == 99.0
    trimmed = trim_record_trace(_record(), 2)
    assert [step["index"] for step in trimmed.trace] == [5, 6]
    assert trim_record_trace(_record(), None) == _record()


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"execution_id": "e\x00"}, InvalidIdentifier, "record execution id"),
        (
            {"execution": Execution(id="other", definition_id="d", version=1)},
            InvalidArgument,
            "must carry the record's id",
        ),
        ({"execution": Execution(id="e1", definition_id="d")}, InvalidArgument, "version 0"),
        ({"outbox": (OutboxEntry(1, "e2", Event(kind="k")),)}, InvalidArgument, "targets 'e2'"),
        ({"outbox": (OutboxEntry(1, None, Event(kind="k")),)}, InvalidArgument, "targets None"),
        ({"spawns": (SpawnEntry(1, "p", "c", "/r"),)}, InvalidArgument, "written by 'p'"),
        ({"trace": ({"index": 1}, {"index": 3})}, InvalidArgument, "contiguous"),
        ({"trace": ({"index": -1},)}, InvalidArgument, "index -1"),
        ({"trace": ({"s": 1},)}, InvalidArgument, "index None"),
        ({"processed": (("a", 1.0), ("a", 2.0))}, InvalidArgument, "marked twice"),
        ({"processed": (("a", float("nan")),)}, InvalidPayload, "finite"),
        ({"timers": (("/a", 1.0), ("/a", 2.0))}, InvalidArgument, "armed twice"),
        ({"timers": (("/a\x00", 1.0),)}, InvalidIdentifier, "timers"),
        ({"execution": None}, InvalidArgument, "no execution"),
        ({"spawns": (SpawnEntry(1, "e1", "c", "/r", {1: 2}),)}, InvalidPayload, "context"),  # type: ignore[dict-item]
    ],
)
def test_prepare_import_refuses_bad_records(
    changes: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        prepare_import(_record(**changes), trace_max=None)


def test_prepare_import_enforces_the_document_limit_and_type() -> None:
    big = Execution(id="e1", definition_id="d", version=1, context={"x": "y" * 5000})
    with pytest.raises(PayloadTooLarge):
        prepare_import(_record(execution=big), trace_max=None, max_document_bytes=1000)
    with pytest.raises(TypeError, match="ExecutionRecord"):
        prepare_import("e1", trace_max=None)  # type: ignore[arg-type]


def test_relay_only_record_is_accepted() -> None:
    record = ExecutionRecord(
        execution_id="child", execution=None, outbox=(OutboxEntry(1, "child", Event(kind="k")),)
    )
    prepared = prepare_import(record, trace_max=None)
    assert prepared.execution is None and prepared.row_count == 1
    assert not record.is_empty and ExecutionRecord(execution_id="x", execution=None).is_empty


def test_digest_ignores_seqs_key_order_and_sorting_but_not_content() -> None:
    record = _record()
    digest = record_digest(record)
    reseq = replace(
        record,
        outbox=tuple(replace(e, seq=e.seq + 100) for e in record.outbox),
        spawns=tuple(replace(s, seq=s.seq + 7) for s in record.spawns),
        processed=tuple(reversed(record.processed)),
        timers=tuple(reversed(record.timers)),
        updated_at=None,
    )
    assert record_digest(reseq) == digest
    reordered = Execution.model_validate(
        dict(reversed(list(record.execution.model_dump().items()))) if record.execution else {}
    )
    assert record_digest(replace(record, execution=reordered)) == digest
    for changed in (
        replace(record, timers=(("/a", 10.000000000000002), ("/b", 20.0))),
        replace(record, processed=(("ev-a", 1.0),)),
        replace(record, trace=record.trace[1:]),
        replace(
            record, outbox=tuple(reversed([replace(e, seq=i) for i, e in enumerate(record.outbox)]))
        ),
    ):
        assert record_digest(changed) != digest


def test_digest_covers_fields_a_newer_release_added() -> None:
    plain = _record()
    assert plain.execution is not None
    data = plain.execution.model_dump() | {"added_later": 1}
    extended = Execution.model_validate(data, context=KEEP_UNKNOWN_FIELDS)
    assert record_digest(replace(plain, execution=extended)) != record_digest(plain)


# -- schema verdicts ---------------------------------------------------------------------------


def _verdict(found: int | None, written_by: str | None = None) -> str:
    return schema_verdict(
        found,
        current=3,
        upgrades={1, 2},
        where="the test store",
        distribution="harel-store-example",
        written_by=written_by,
    )


def test_schema_verdicts() -> None:
    assert _verdict(None) == "create"
    assert _verdict(3) == "ready"
    assert _verdict(1) == "upgrade" and _verdict(2) == "upgrade"


def test_newer_layout_names_both_versions_and_the_release_to_install() -> None:
    with pytest.raises(SchemaVersionError) as caught:
        _verdict(4, "harel-store-example 9.1")
    message = str(caught.value)
    assert "the test store" in message and "version 4" in message and "version 3" in message
    assert "harel-store-example 9.1" in message
    assert "pip install 'harel-store-example>=9.1'" in message
    with pytest.raises(SchemaVersionError, match="pip install --upgrade harel-store-example"):
        _verdict(4)


def test_layout_older_than_any_upgrade_is_refused() -> None:
    with pytest.raises(SchemaVersionError, match="older than any"):
        schema_verdict(0, current=3, upgrades={2}, where="w", distribution="harel-store-example")


# -- settled async writes ----------------------------------------------------------------------


class _SlowWrites(AsyncPlanStore[Any]):
    """An AsyncPlanStore whose every operation takes a while and then applies."""

    def __init__(self, fail: bool = False) -> None:
        self.applied: list[str] = []
        self.fail = fail
        self.started = asyncio.Event()

    async def _run(self, operation: Op[Any]) -> Any:
        operation.close()
        self.started.set()
        await asyncio.sleep(0.05)
        if self.fail:
            raise InvalidArgument("refused")
        self.applied.append("write")
        return "value"

    async def close(self) -> None:
        return None


async def _cancel_midway(store: _SlowWrites) -> asyncio.Task[Any]:
    def op() -> Op[None]:
        yield None

    task = asyncio.ensure_future(store._write(op()))
    await store.started.wait()
    task.cancel()
    await asyncio.wait([task])
    return task


def test_a_cancelled_write_finishes_before_the_cancel_is_raised() -> None:
    store = _SlowWrites()
    task = asyncio.run(_cancel_midway(store))
    assert task.cancelled()
    assert store.applied == ["write"]


def test_a_write_that_fails_after_a_cancel_still_raises_cancelled() -> None:
    store = _SlowWrites(fail=True)
    task = asyncio.run(_cancel_midway(store))
    assert task.cancelled() and store.applied == []


def test_an_uncancelled_write_returns_its_value_and_error() -> None:
    def op() -> Op[None]:
        yield None

    async def scenario() -> tuple[Any, bool]:
        return await _SlowWrites()._settle(op())

    assert asyncio.run(scenario()) == ("value", False)

    async def failing() -> Any:
        return await _SlowWrites(fail=True)._write(op())

    with pytest.raises(InvalidArgument):
        asyncio.run(failing())
