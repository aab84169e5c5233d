"""``from_url``'s ``connect_retries`` / ``retry_delay`` go through harel-core's ``retry_arguments``
(a file retries nothing by default, a server 5 times): the URL's strings are parsed, keywords
are never coerced, a bad value is a ``ValueError`` naming the knob (the same message as on
every backend), never showing the token."""

from __future__ import annotations

import pytest
from harel_store_libsql import LibsqlStore
from harel_store_libsql._options import from_url_args, parse_libsql_url

SERVER = "libsql://127.0.0.1:9?tls=false&auth_token=libsql-s3cret"


def test_retry_knobs_ride_in_the_url_or_as_keywords() -> None:
    database, knobs, retry = from_url_args(f"{SERVER}&connect_retries=0&retry_delay=0.1", {})
    assert (database, knobs) == ("http://127.0.0.1:9", {"auth_token": "libsql-s3cret"})
    assert (retry["retries"], retry["delay"]) == (0, 0.1)
    assert from_url_args(SERVER, {})[2]["retries"] == 5
    file_retry = from_url_args("libsql+file:///:memory:?retry_delay=2", {"connect_retries": 1})[2]
    assert (file_retry["retries"], file_retry["delay"]) == (1, 2.0)
    assert from_url_args("libsql+file:///x.db", {})[2]["retries"] == 0
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
