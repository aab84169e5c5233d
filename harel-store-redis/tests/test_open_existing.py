"""Read-only opens (``open_store(url, create=False)``, ``harel list``) create nothing in
Redis: one ``EXISTS`` of the layout keys under the prefix, no script, no key (issue 19)."""

from __future__ import annotations

import pytest
import redis
from harel.cli import main
from harel.registry import open_store
from harel.store.errors import StoreNotFound, StoreUnavailable
from harel_store_redis._exists import store_exists
from harel_store_redis.testing import RedisHarness
from harel_testing.redis import free_port


def keys_under(harness: RedisHarness) -> list[bytes]:
    with redis.Redis(**harness.options.client_kwargs()) as client:
        return sorted(client.scan_iter(match=harness.prefix.encode() + b"*"))


def test_list_on_a_fresh_prefix_says_so_and_writes_no_key(
    harel_harness: RedisHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["list", "--store", harel_harness.url()])
    err = capsys.readouterr().err
    assert code == 2 and "there is no redis store at redis://" in err
    assert "nothing was created" in err
    assert keys_under(harel_harness) == []


def test_create_false_opens_the_store_once_created(harel_harness: RedisHarness) -> None:
    url = harel_harness.url()
    open_store(url).close()
    assert harel_harness.keys.layout in keys_under(harel_harness)
    store = open_store(url, create=False)
    try:
        assert store.list_executions().items == []
    finally:
        store.close()


def test_a_version_1_namespace_counts_as_a_store(harel_harness: RedisHarness) -> None:
    with redis.Redis(**harel_harness.options.client_kwargs()) as client:
        client.set(harel_harness.keys.schema, b"1")  # version 1 kept only this key
    assert store_exists(harel_harness.url())


def test_create_false_on_an_unreachable_server_is_unavailable() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0?prefix=harel-typo:"
    with pytest.raises(StoreUnavailable) as info:
        open_store(url, create=False, connect_retries=0)
    assert not isinstance(info.value, StoreNotFound)
