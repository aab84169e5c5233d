"""``from_url``'s ``connect_retries`` / ``retry_delay`` go through harel-core's ``retry_arguments``
(a file retries nothing by default, a server 5 times): the URL's strings are parsed, keywords
are never coerced, a bad value is a ``ValueError`` naming the knob (the same message as on
every backend), never showing the token."""

from __future__ import annotations

import pytest
from harel_store_libsql import LibsqlStore
from harel_store_libsql._spec import SPEC, parse_libsql_url

SERVER = "libsql://127.0.0.1:9?tls=false&auth_token=libsql-s3cret"


def test_retry_knobs_ride_in_the_url_or_as_keywords() -> None:
    arguments, retry = SPEC.open_args(f"{SERVER}&connect_retries=0&retry_delay=0.1", {})
    assert arguments["database"] == "http://127.0.0.1:9"
    assert arguments["auth_token"] == "libsql-s3cret"
    assert (retry["retries"], retry["delay"]) == (0, 0.1)
    assert "libsql-s3cret" not in retry["what"]
    assert SPEC.open_args(SERVER, {}).retry["retries"] == 5
    file_retry = SPEC.open_args("libsql+file:///:memory:?retry_delay=2", {"connect_retries": 1})[1]
    assert (file_retry["retries"], file_retry["delay"]) == (1, 2.0)
    assert SPEC.open_args("libsql+file:///x.db", {}).retry["retries"] == 0
    replica = "libsql+file:///r.db?sync_url=https://h&authToken=libsql-s3cret"
    assert SPEC.open_args(replica, {}).retry["retries"] == 5  # a replica reaches its primary
    assert parse_libsql_url("libsql+file:///x.db?connect_retries=3") == ("x.db", {})
    LibsqlStore.from_url("libsql+file:///:memory:?connect_retries=2&retry_delay=0").close()


def test_a_bad_retry_knob_is_refused_without_the_token() -> None:
    with pytest.raises(
        ValueError, match=r"^option connect_retries='abc' must be an integer$"
    ) as url:
        LibsqlStore.from_url(f"{SERVER}&connect_retries=abc")
    with pytest.raises(ValueError, match=r"^retry_delay must be a finite number") as keyword:
        LibsqlStore.from_url(SERVER, retry_delay="0.5")  # was float("0.5")
    assert "libsql-s3cret" not in f"{url.value} {keyword.value}"
