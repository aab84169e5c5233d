"""``from_url``'s ``connect_retries`` / ``retry_delay`` go through harel-core's ``retry_arguments``
(when the options are made and again when a store opens them): the URL's strings are parsed,
keywords are never coerced, a bad value is a ``ValueError`` naming the knob (the same message
as on every backend).  No server needed: everything is refused before connecting."""

from __future__ import annotations

import pytest
from harel_store_postgres import AsyncPostgresStore, PostgresStore
from harel_store_postgres._options import PostgresOptions, make_options


def test_retry_knobs_ride_in_the_url_or_as_keywords() -> None:
    options = make_options("postgresql://u:pw@h/db?connect_retries=3&retry_delay=0.25")
    assert (options.connect_retries, options.retry_delay) == (3, 0.25)
    assert "retry_delay" not in options.connect and "connect_retries" not in options.connect
    retry = options.retry_arguments()
    assert (retry["retries"], retry["delay"], retry["what"]) == (
        3,
        0.25,
        "postgresql://u:***@h/db?connect_retries=3&retry_delay=0.25",
    )
    keyword = make_options("postgresql://h/db?connect_retries=3", connect_retries=0, retry_delay=1)
    assert (keyword.connect_retries, keyword.retry_delay) == (0, 1.0)
    defaults = make_options("postgresql://h/db").retry_arguments()
    assert (defaults["retries"], defaults["delay"]) == (8, 0.5)


def test_a_bad_retry_knob_is_refused_without_the_password() -> None:
    url = "postgresql://u:pg-s3cret@127.0.0.1:9/db"
    with pytest.raises(ValueError, match=r"^option retry_delay=-0\.5 must be >= 0\.0$") as in_url:
        PostgresStore.from_url(f"{url}?retry_delay=-0.5")
    with pytest.raises(ValueError, match=r"^connect_retries must be an int >= 0, got 2\.7$") as kw:
        PostgresStore.from_url(url, connect_retries=2.7)
    assert "pg-s3cret" not in str(in_url.value) + str(kw.value)


@pytest.mark.anyio
async def test_options_built_by_hand_are_checked_when_opened() -> None:
    bad = PostgresOptions(connect={"host": "127.0.0.1", "port": "9"}, where="w", connect_retries=-1)
    with pytest.raises(ValueError, match="connect_retries must be an int >= 0, got -1"):
        PostgresStore.open(bad)
    with pytest.raises(ValueError, match="connect_retries must be an int >= 0, got -1"):
        await AsyncPostgresStore.open(bad)
