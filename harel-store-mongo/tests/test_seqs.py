"""Seqs without a store-wide counter (issue 22): the hybrid clock and the writer ids of
:mod:`harel_store_mongo._seq`, that no commit writes a store-wide document, and the ordering
promise the README states — played with two "processes" (stores with their own injected
clocks) whose clocks disagree.

The promise, as tested here:

1. seqs are unique in the store (two writers on one tick differ in their writer id);
2. one execution's entries strictly increase in commit order, whatever the writers' clocks
   (the commit's filter requires its first seq above the document's ``seq_hi``; a writer
   behind it sends its write once more, seqs issued above);
3. one process's writes are ordered as it made them (one clock for all its stores);
4. a write made after reading something (loading the execution, a claim, a sweep) is ordered
   after what was read — for a claim, after the whole commit that wrote the entries read;
5. otherwise two processes' writes are ordered when they are further apart than the two
   clocks' skew; closer together they may come in either order.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest
from harel.model import Event, Execution
from harel.store.common.commit import committing
from harel.store.contract import TimerOp
from harel.store.errors import StoreCorrupted
from harel_store_mongo import MongoStore, _claims, _operations, _records
from harel_store_mongo._operations import DuplicateKey
from harel_store_mongo._requests import Request
from harel_store_mongo._schema import EXECUTIONS, META, WORK
from harel_store_mongo._seq import (
    EPOCH_MS,
    LOGICAL_BITS,
    MAX_AHEAD,
    MIN_TICK,
    ROTATE_AFTER,
    TICK_END,
    WRITER_BITS,
    WRITERS,
    HybridClock,
    SeqSource,
    seq_of,
    tick_of,
)
from harel_store_mongo.testing import (
    ANY_DOCUMENT,
    CannedResult,
    MongomockHarness,
    MongoServerHarness,
    run_plan,
)

Harness = MongomockHarness | MongoServerHarness
NOW = 1_800_000_000.0
"""A wall-clock reading (2027-01-15) the skewed clocks below start from."""
MS = 1 << LOGICAL_BITS
"""Ticks per millisecond."""


def source(writer: int = 3) -> SeqSource:
    """A store's seqs on a clock frozen at :data:`NOW`, its writer id registered."""
    seqs = SeqSource(HybridClock(lambda: NOW), monotonic=lambda: 0.0)
    seqs.registered({"n": writer}, 0.0, "test")
    return seqs


def exe(execution_id: str = "x", version: int = 0) -> Execution:
    return Execution(id=execution_id, definition_id="d", version=version)


def commit(
    e: Execution, answer: Callable[[Request], Any] = lambda r: CannedResult(), **effects: Any
) -> tuple[Any, list[Request]]:
    emits = effects.pop("emits", [])
    with committing(e, emits, **effects) as prepared:
        return run_plan(_operations.commit_plan(prepared, 200, "test", source()), answer)


class Wall:
    """A settable wall clock: ``now`` plus this machine's ``skew``."""

    def __init__(self, skew: float = 0.0) -> None:
        self.now = NOW
        self.skew = skew

    def __call__(self) -> float:
        return self.now + self.skew


def ev(event_id: str) -> Event:
    return Event(id=event_id, kind="Go")


def new_exe(execution_id: str) -> Execution:
    return Execution(id=execution_id, definition_id="flow")


@pytest.fixture
def harness(harel_harness: Harness) -> Harness:
    return harel_harness


@pytest.fixture
def machines(harness: Harness) -> Iterator[tuple[MongoStore, MongoStore, Wall]]:
    """Two writer processes on one database: ``fast``, whose clock runs 5 s ahead, and
    ``slow``, whose clock runs 5 s behind (10 s of skew between them), and the shared real
    time they read (``wall.now``; each adds its skew)."""
    wall = Wall()
    fast = MongoStore(
        harness.sync_client(),
        db=harness.db,
        owns_client=True,
        seq_clock=HybridClock(lambda: wall.now + 5.0),
    )
    slow = MongoStore(
        harness.sync_client(),
        db=harness.db,
        owns_client=True,
        seq_clock=HybridClock(lambda: wall.now - 5.0),
    )
    yield fast, slow, wall
    fast.close()
    slow.close()


def seqs_to(store: MongoStore, target: str) -> list[tuple[str, int]]:
    """``(event id, seq)`` of the pending entries targeted at ``target``, in seq order."""
    return [(e.event.id, e.seq) for e in store.pending_outbox() if e.target_id == target]


# -- the clock and the writer ids ---------------------------------------------------------------


def test_a_seq_is_a_tick_and_a_writer_and_fits_int64_until_2094() -> None:
    assert seq_of(tick_of(12345 << WRITER_BITS | 7), 7) == 12345 << WRITER_BITS | 7
    assert (TICK_END - 1) << WRITER_BITS | (WRITERS - 1) == 2**63 - 1
    last_ms = (TICK_END >> LOGICAL_BITS) + EPOCH_MS  # Unix milliseconds
    assert 2094 < 1970 + last_ms / (365.2425 * 86400e3) < 2095
    assert seq_of(MIN_TICK, 0) == 2**53
    assert seq_of(HybridClock(lambda: 0.0).issue(1), 0) == 2**53  # a clock before 2025


def test_the_clock_never_repeats_never_goes_back_and_counts_within_a_millisecond() -> None:
    wall = Wall()
    clock = HybridClock(wall)
    first = clock.issue(3)
    assert first == clock.physical() and clock.last == first + 2
    wall.now -= 3600  # the wall clock steps back an hour: ticks still increase
    assert clock.issue(1) == first + 3
    wall.now += 7200
    later = clock.issue(1)
    assert later == clock.physical() > first + 3
    assert clock.issue(2, above=later + 100) == later + 101  # above a given tick too


def test_the_clock_observes_what_it_reads_but_not_a_clock_far_ahead() -> None:
    wall = Wall()
    clock = HybridClock(wall)
    near = clock.physical() + int(MAX_AHEAD * 1000 - 1) * MS
    clock.observe(near)
    assert clock.issue(1) == near + 1
    far = clock.physical() + int(MAX_AHEAD * 1000 + 1000) * MS
    clock.observe(far)  # one machine with a wrong clock does not drag everyone along
    assert clock.issue(1) == near + 2


def test_a_damaged_seq_hi_near_the_end_of_the_range_is_reported() -> None:
    with pytest.raises(StoreCorrupted, match="seq_hi"):
        HybridClock().issue(2, above=TICK_END - 2)


def test_a_store_registers_once_then_again_after_the_rotation() -> None:
    clock = {"t": 0.0}
    seqs = SeqSource(HybridClock(Wall()), monotonic=lambda: clock["t"])
    assert seqs.needs_writer() == 0.0
    seqs.registered({"n": 3 * WRITERS + 5}, 0.0, "test")
    assert seqs.writer == 5 and seqs.needs_writer() is None
    first = seqs.issue(2)
    assert [s % WRITERS for s in first] == [5, 5] and first[0] < first[1]
    clock["t"] = ROTATE_AFTER - 1
    assert seqs.needs_writer() is None
    clock["t"] = ROTATE_AFTER
    assert seqs.needs_writer() == ROTATE_AFTER
    seqs.registered({"n": 9}, ROTATE_AFTER, "test")
    assert seqs.issue(1)[0] > first[1]  # a new id, the same clock: still increasing


def test_a_store_rotates_its_writer_id_with_one_registration(harness: Harness) -> None:
    store = harness.open_sync()
    try:
        clock = {"t": 0.0}
        store._plan.seqs = SeqSource(monotonic=lambda: clock["t"])
        exe = new_exe("rot")
        with harness.counting() as calls:
            store.commit(exe, [(None, ev("a"))])
        assert calls.count((META, "find_one_and_update")) == 1
        clock["t"] = ROTATE_AFTER / 2
        with harness.counting() as calls:
            store.commit(exe, [(None, ev("b"))])
        assert (META, "find_one_and_update") not in calls
        clock["t"] = ROTATE_AFTER
        with harness.counting() as calls:
            store.commit(exe, [(None, ev("c"))])
        assert calls.count((META, "find_one_and_update")) == 1
        seqs = [e.seq for e in store.pending_outbox()]
        assert [s % WRITERS for s in seqs] == [1, 1, 2] and seqs == sorted(seqs)
    finally:
        store.close()


# -- the plan: a seq_hi in the way ---------------------------------------------------------------


def probe_then(doc: dict[str, Any] | None, *, insert: bool = False) -> Callable[[Request], Any]:
    """Replies: the first commit write misses (a duplicate key for an insert), the probe reads
    ``doc``, the next write applies."""
    writes: list[Request] = []

    def answer(request: Request) -> Any:
        if request.collection != EXECUTIONS:
            return CannedResult()
        if request.method == "find_one":
            return doc
        writes.append(request)
        if len(writes) == 1:
            if insert:
                raise DuplicateKey("E11000")
            return CannedResult(matched_count=0)
        return CannedResult()

    return answer


def test_a_seq_hi_ahead_of_the_clock_sends_the_write_again_with_seqs_above_it() -> None:
    """Another writer's clock ran ahead: the version and receipt hold, but the document's
    ``seq_hi`` is at or above the commit's first seq.  The seqs are issued again above it and
    the write sent again under the state read: 3 requests on ``executions``."""
    ahead = seq_of(source().clock.physical() + 50_000 * MS, 9)  # 50 s ahead, writer 9
    doc = {"_id": "x", "version": 2, "r2": "theirs", "seq_hi": ahead}
    e = exe(version=2)
    _, sent = commit(e, probe_then(doc), emits=[("t", ev("o"))], spawns=[("c", "/r", {})])
    assert e.version == 3
    first, probe, again = [r for r in sent if r.collection == EXECUTIONS]
    assert probe.method == "find_one" and probe.args[1]["seq_hi"] == 1
    old = first.args[0]["$nor"][0]["seq_hi"]["$gte"]
    assert old < ahead
    stage = again.args[1][0]["$set"]
    outbox = stage["outbox"]["$concatArrays"][1]["$literal"]
    spawns = stage["spawns"]["$concatArrays"][1]["$literal"]
    new = [outbox[0]["seq"], spawns[0]["seq"]]
    assert ahead < new[0] < new[1] and stage["seq_hi"] == {"$literal": new[1]}
    assert tick_of(new[0]) == tick_of(ahead) + 1 and new[0] % WRITERS == 3
    assert again.args[0] == {
        "_id": "x",
        "version": 2,
        "$nor": [{"seq_hi": {"$gte": new[0]}}],
        "r2": "theirs",
    }


def test_an_insert_over_a_relay_only_document_with_seqs_ahead_is_sent_again() -> None:
    """A purged execution's relay-only document keeps its ``seq_hi``: a new execution of that
    id orders its entries after the old one's too (a duplicate key, the probe, the upsert)."""
    ahead = seq_of(source().clock.physical() + 1000 * MS, 9)
    doc = {"_id": "x", "version": 0, "seq_hi": ahead}
    e = exe(version=0)
    _, sent = commit(e, probe_then(doc, insert=True), emits=[("t", ev("o"))])
    assert e.version == 1
    _first, _probe, again = [r for r in sent if r.collection == EXECUTIONS]
    assert again.kwargs == {"upsert": True}
    (entry,) = again.args[1][0]["$set"]["outbox"]["$concatArrays"][1]["$literal"]
    assert entry["seq"] > ahead
    assert again.args[0] == {"_id": "x", "version": 0, "$nor": [{"seq_hi": {"$gte": entry["seq"]}}]}


def test_a_commit_without_entries_ignores_seq_hi() -> None:
    _, sent = commit(exe(version=2), timers=[TimerOp.schedule("/a", 1.0)])
    (write,) = [r for r in sent if r.collection == EXECUTIONS]
    assert "$nor" not in write.args[0] and "seq_hi" not in write.args[1][0]["$set"]


def test_reads_observe_the_seqs_they_return() -> None:
    """load, load_for_event, the sweeps, claims and exports move the clock past what they
    read (the documents' ``seq_hi`` and the entries)."""
    tick = source().clock.physical() + 2000 * MS
    doc = {
        "_id": "x",
        "version": 1,
        "data": exe(version=1).model_dump_json(),
        "seq_hi": seq_of(tick, 4),
        "outbox": [{"seq": seq_of(tick - 5, 4), "target": "x", "event": ev("o").model_dump_json()}],
    }
    reads: list[Callable[[SeqSource], Generator[Request, Any, Any]]] = [
        lambda s: _operations.load_plan("x", s),
        lambda s: _operations.load_for_event_plan("x", "e", s),
        lambda s: _operations.pending_outbox_plan(5, s),
        lambda s: _operations.pending_spawns_plan(5, s),
        lambda s: _records.export_plan("x", s),
        lambda s: _claims.units_plan("x", s),
    ]
    for read in reads:
        seqs = source()
        run_plan(read(seqs), lambda r: [doc] if r.cursor else doc)
        assert seqs.clock.last == tick, read


# -- no commit writes a store-wide document ------------------------------------------------------


def test_no_commit_writes_a_store_wide_document(harness: Harness) -> None:
    """Every write of every commit shape goes to the execution's own document or to the work
    rows of the groups it gives work to (its own; its emits' targets), counted through the
    harness's driver calls.  The only document commits of several executions write that is not
    their own group's is the untargeted group's row, by the commits that broadcast (the
    contract's one group of untargeted entries).  ``meta`` is written once per store, before
    its first seq (the writer registration), never by a commit afterwards."""
    store = harness.open_sync()
    try:
        store.enqueue("warm-up", ev("w"))  # the registration
        writers: dict[tuple[str, Any], set[str]] = {}
        executions = [new_exe(f"x{n}") for n in range(4)]
        for round_ in range(3):
            for n, e in enumerate(executions):
                peer = f"x{(n + 1) % 4}"
                shapes: list[dict[str, Any]] = [
                    {},
                    {"processed_event_id": f"in-{round_}-{n}", "trace": {"k": n}},
                    {"timers": [TimerOp.schedule("/t", 10.0 + n)]},
                    {"emits": [(peer, ev(f"o-{round_}-{n}"))]},
                    {"emits": [(None, ev(f"b-{round_}-{n}"))], "spawns": [(f"k{n}", "/r", {})]},
                ]
                shape = shapes[(round_ + n) % len(shapes)]
                emits = shape.pop("emits", [])
                with harness.writing() as writes:
                    store.commit(e, emits, **shape)
                allowed = {(EXECUTIONS, e.id), (WORK, e.id)}
                allowed |= {(WORK, target if target is not None else "") for target, _ in emits}
                assert (EXECUTIONS, "update_one", (e.id,)) in writes or (
                    EXECUTIONS,
                    "find_one_and_update",
                    (e.id,),
                ) in writes, writes
                for collection, method, ids in writes:
                    assert collection != META, (method, ids)
                    assert ANY_DOCUMENT not in ids, (collection, method)
                    for key in ids:
                        assert (collection, key) in allowed, (e.id, collection, method, key)
                        writers.setdefault((collection, key), set()).add(e.id)
        shared = {key for key, by in writers.items() if len(by) > 1}
        own_groups = {(WORK, e.id) for e in executions}
        assert shared - own_groups == {(WORK, "")}, shared  # the untargeted group's row only
    finally:
        store.close()


# -- the ordering promise ------------------------------------------------------------------------


def test_seqs_are_unique_when_two_writers_share_every_tick(harness: Harness) -> None:
    """Two processes whose clocks read the very same instant, forever: their ticks coincide,
    their writer ids do not, so every seq is distinct and each ack removes its own entry."""
    frozen = [
        MongoStore(
            harness.sync_client(),
            db=harness.db,
            owns_client=True,
            seq_clock=HybridClock(lambda: NOW),
        )
        for _ in range(2)
    ]
    try:
        seqs = [frozen[n % 2].enqueue("t", ev(f"q{n}")) for n in range(10)]
        assert len(set(seqs)) == 10
        assert len({tick_of(s) for s in seqs}) == 5  # each tick used by both writers
        for seq in seqs[::2]:
            frozen[1].ack_outbox(seq)
        left = [e.event.id for e in frozen[0].pending_outbox()]
        assert left == [f"q{n}" for n in (1, 3, 5, 7, 9)]
    finally:
        for store in frozen:
            store.close()


def test_one_process_orders_its_stores_writes_within_one_millisecond(harness: Harness) -> None:
    """Two stores of one process share its clock: interleaved commits on a frozen clock come
    in commit order (the logical count), as the kit's single-process tests expect."""
    clock = HybridClock(lambda: NOW)
    stores = [
        MongoStore(harness.sync_client(), db=harness.db, owns_client=True, seq_clock=clock)
        for _ in range(2)
    ]
    try:
        a, b = new_exe("a"), new_exe("b")
        for n in range(4):
            stores[n % 2].commit([a, b][n % 2], [("t", ev(f"e{n}"))])
        order = seqs_to(stores[0], "t")
        assert [event for event, _ in order] == ["e0", "e1", "e2", "e3"]
        assert [seq for _, seq in order] == sorted(seq for _, seq in order)
    finally:
        for store in stores:
            store.close()


def test_one_executions_entries_increase_whatever_the_clocks(
    harness: Harness, machines: tuple[MongoStore, MongoStore, Wall]
) -> None:
    """The fast machine commits x; the slow one (10 s behind) commits x from a copy it never
    read itself: its first write misses on ``seq_hi``, the probe says why, the write goes
    again with seqs above it (+ 2 requests, only then).  A copy it loads itself moves its
    clock on: one write."""
    fast, slow, wall = machines
    x = new_exe("x")
    fast.commit(x, [("t", ev("f1"))])
    handed = fast.load("x")  # e.g. passed along by a process that read it
    assert handed is not None
    wall.now += 1.0
    with harness.counting() as calls:
        slow.commit(handed, [("t", ev("s1"))])
    on_executions = [method for collection, method in calls if collection == EXECUTIONS]
    assert on_executions == ["update_one", "find_one", "update_one"]
    mine = slow.load("x")  # reading it moves the slow clock past its seq_hi
    assert mine is not None
    wall.now += 1.0
    with harness.counting() as calls:
        slow.commit(mine, [("t", ev("s2"))])
    assert [m for c, m in calls if c == EXECUTIONS] == ["update_one"]
    order = seqs_to(fast, "t")
    assert [event for event, _ in order] == ["f1", "s1", "s2"]
    doc = harness.database()[EXECUTIONS].find_one({"_id": "x"})
    assert doc is not None and doc["seq_hi"] == order[-1][1]


def test_a_claim_orders_what_follows_after_the_whole_commit_it_read(
    machines: tuple[MongoStore, MongoStore, Wall],
) -> None:
    """The fast machine's commit of a emits to t, then to u.  The slow machine claims t's
    group (reading only the first entry), delivers it and commits t, which emits to u: its
    entry is ordered after a's entry to u — the claim read a's ``seq_hi`` too."""
    fast, slow, wall = machines
    fast.commit(new_exe("a"), [("t", ev("a-to-t")), ("u", ev("a-to-u"))])
    wall.now += 0.5
    (claim,) = slow.claim("w", NOW + 100, lease=30.0, limit=1)
    assert claim.execution_id == "t" and [e.event.id for e in claim.outbox] == ["a-to-t"]
    t = new_exe("t")
    slow.commit(t, [("u", ev("t-to-u"))], processed_event_id="a-to-t")
    (_, theirs), (_, ours) = seqs_to(fast, "u")
    assert [event for event, _ in seqs_to(fast, "u")] == ["a-to-u", "t-to-u"]
    assert tick_of(ours) > tick_of(theirs)  # not by the writer ids' tie-break


def test_writes_with_no_contact_are_ordered_only_beyond_the_skew(
    machines: tuple[MongoStore, MongoStore, Wall],
) -> None:
    """No read links them: the slow machine's entry written 1 s after the fast one's commit
    returned can come first (the clocks are 10 s apart); written more than the skew later, it
    comes after.  The README states exactly this limit."""
    fast, slow, wall = machines
    fast.commit(new_exe("a"), [("t", ev("fast"))])
    wall.now += 1.0
    slow.commit(new_exe("b"), [("t", ev("slow, 1 s later"))])
    assert [event for event, _ in seqs_to(fast, "t")] == ["slow, 1 s later", "fast"]
    wall.now += 10.0  # now further apart than the skew
    slow.commit(new_exe("c"), [("t", ev("slow, 11 s later"))])
    assert [event for event, _ in seqs_to(fast, "t")][-1] == "slow, 11 s later"


def test_a_sweep_orders_an_enqueue_after_what_it_read(
    machines: tuple[MongoStore, MongoStore, Wall],
) -> None:
    """A producer on the slow machine that listed the pending entries enqueues after them."""
    fast, slow, _wall = machines
    fast.commit(new_exe("a"), [("t", ev("fast"))])
    slow.pending_outbox()
    seq = slow.enqueue("t", ev("slow"))
    assert [event for event, _ in seqs_to(fast, "t")] == ["fast", "slow"]
    assert seq == seqs_to(fast, "t")[-1][1]
