"""The sync store's kept connection (``harel_store_redis._lane``): which requests ride it, that
a reply is never read by another request, and that threads, a fork, a server that closed the
connection and a caller's own client all keep working as through the pool."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from harel.model import Execution, Status
from harel.store.errors import CommitOutcomeUnknown, StoreUnavailable
from harel_store_redis import RedisStore
from harel_store_redis._lane import BUSY, Lane
from harel_store_redis.testing import RedisHarness
from harel_testing.redis import RedisServerProcess


def new_exe(execution_id: str) -> Execution:
    return Execution(id=execution_id, definition_id="flow", status=Status.RUNNING)


@pytest.fixture
def store(harel_harness: RedisHarness) -> Iterator[RedisStore]:
    opened = harel_harness.open_sync()
    yield opened
    opened.close()


def lane_of(store: RedisStore) -> Lane:
    lane = store._lane
    assert lane is not None
    return lane


def kept(store: RedisStore) -> Any:
    """The connection the store's lane keeps."""
    return lane_of(store)._conn


def test_an_owned_client_sends_its_scripts_on_one_kept_connection(store: RedisStore) -> None:
    exe = new_exe("e1")
    store.commit(exe, [])
    conn = kept(store)
    assert conn is not None
    pool = store._client.connection_pool  # type: ignore[union-attr]
    assert conn in pool._in_use_connections  # checked out of the pool: it counts there
    for n in range(5):
        exe.context["n"] = n
        store.commit(exe, [])
        assert store.load("e1") == exe  # LOAD is a script too: the same connection
    assert kept(store) is conn
    store.close()
    assert conn not in pool._in_use_connections  # given back before the pool is closed


def test_only_script_calls_ride_the_lane(store: RedisStore) -> None:
    lane = lane_of(store)
    assert lane.send(("PING",)) is BUSY  # redis-py's callback turns it into True
    assert lane.send(("SCRIPT EXISTS", "0" * 40)) is BUSY
    assert lane.send(("EVAL", "return 7", 0)) == 7


def test_a_caller_s_own_client_never_uses_a_lane(redis_url: str) -> None:
    harness = RedisHarness(redis_url)
    client = redis.Redis(**harness.options.client_kwargs())
    try:
        store = RedisStore(client, prefix=harness.prefix)
        assert store._lane is None
        store.commit(new_exe("e1"), [])
        store.close()
    finally:
        harness.destroy()
        client.close()


def test_a_reply_left_unread_is_never_read_by_the_next_request(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = new_exe("e1")
    store.commit(exe, [])
    conn = kept(store)
    real = conn.read_response
    calls = {"n": 0}

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyboardInterrupt  # the request went out, its reply is never read
        return real(*args, **kwargs)

    monkeypatch.setattr(conn, "read_response", interrupted)
    exe.context["n"] = 1
    with pytest.raises(KeyboardInterrupt):
        store.commit(exe, [])
    assert conn._sock is None  # the connection was closed: its reply went with it
    assert exe.version == 1  # the failed commit's version was given back
    loaded = store.load("e1")  # reconnected: this reply is LOAD's own, not the commit's
    assert loaded is not None and loaded.version == 2 and loaded.context == {"n": 1}
    store.commit(exe, [])  # the same commit re-sent: its receipt says it is stored
    assert exe.version == 2
    exe.context["n"] = 2
    store.commit(exe, [])
    assert store.load("e1") == exe


def test_a_connection_the_server_closed_is_replaced_before_sending(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = new_exe("e1")
    store.commit(exe, [])
    conn = kept(store)
    conn.send_command("CLIENT", "ID")
    own_id = conn.read_response()
    with redis.Redis(host=conn.host, port=conn.port, db=conn.db) as admin:
        assert admin.execute_command("CLIENT", "KILL", "ID", own_id) == 1
    sent: list[Any] = []
    real = conn.send_packed_command

    def counted(packed: Any, *args: Any, **kwargs: Any) -> Any:
        if b"EVALSHA" in b"".join(packed):  # not the reconnection's handshake
            sent.append(packed)
        return real(packed, *args, **kwargs)

    monkeypatch.setattr(conn, "send_packed_command", counted)
    exe.context["n"] = 1
    store.commit(exe, [])  # the readiness check reconnected before sending:
    assert len(sent) == 1  # one attempt, not a lost reply settled by a re-send
    assert store.load("e1") == exe


def test_a_stopped_server_fails_a_commit_as_never_sent(
    throwaway_redis: RedisServerProcess,
) -> None:
    store = RedisStore.from_url(throwaway_redis.url, connect_retries=0, connect_timeout=1)
    try:
        exe = new_exe("e1")
        store.commit(exe, [])  # the lane holds a connection now
        throwaway_redis.stop()
        with pytest.raises(StoreUnavailable) as info:
            store.commit(exe, [])
        assert type(info.value) is StoreUnavailable  # not CommitOutcomeUnknown
        assert not isinstance(info.value, CommitOutcomeUnknown) and exe.version == 1
        throwaway_redis.start()
        store.commit(exe, [])
        assert exe.version == 2
    finally:
        store.close()


def test_threads_sharing_a_store_all_commit(store: RedisStore) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def worker(index: int) -> None:
        try:
            exe = new_exe(f"t{index}")
            barrier.wait()
            for n in range(40):
                exe.context["n"] = n
                store.commit(exe, [])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for index in range(6):
        loaded = store.load(f"t{index}")
        assert loaded is not None and loaded.version == 40 and loaded.context == {"n": 39}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_uses_a_connection_of_its_own(store: RedisStore) -> None:
    exe = new_exe("e1")
    store.commit(exe, [])
    parent_conn = kept(store)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: commit on its own connection, report, leave at once
        code = 1
        try:
            child = new_exe("child")
            store.commit(child, [])
            ok = kept(store) is not parent_conn and store.load("child") == child
            code = 0 if ok else 2
        finally:
            os.write(write, bytes([code]))
            os._exit(code)
    os.close(write)
    status = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert status == b"\x00"
    assert kept(store) is parent_conn  # the parent's connection was left alone
    exe.context["n"] = 1
    store.commit(exe, [])
    assert store.load("e1") == exe and store.load("child") is not None
