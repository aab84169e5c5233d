"""retry_knobs (a URL's connect_retries / retry_delay) and retry_arguments' strictness: the one
place every backend's from_url validates its retry knobs, so one message for each mistake."""

from __future__ import annotations

import math
from typing import Any

import pytest
from harel import registry
from harel.store.common.retry import RETRY_KNOBS, busy_waits, retry_arguments, retry_knobs
from harel.store.errors import BackendUnavailable, InvalidStoreURL, UnknownScheme


def test_url_strings_become_an_int_and_a_float() -> None:
    assert retry_knobs({"connect_retries": "3", "retry_delay": "0.25", "other": "x"}) == {
        "connect_retries": 3,
        "retry_delay": 0.25,
    }
    assert retry_knobs({"retry_delay": "0"}) == {"retry_delay": 0.0}
    assert retry_knobs({}) == {}
    assert set(RETRY_KNOBS) == {"connect_retries", "retry_delay"}


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"connect_retries": "abc"}, "option connect_retries='abc' must be an integer"),
        ({"connect_retries": "1.5"}, "option connect_retries='1.5' must be an integer"),
        ({"connect_retries": ""}, "option connect_retries='' must be an integer"),
        ({"connect_retries": "-1"}, "option connect_retries=-1 must be >= 0"),
        ({"retry_delay": "abc"}, "option retry_delay='abc' must be a number"),
        ({"retry_delay": "-1"}, "option retry_delay=-1.0 must be >= 0.0"),
        ({"retry_delay": "nan"}, "option retry_delay=nan must be >= 0.0"),
    ],
)
def test_bad_url_strings_are_refused_naming_the_knob(query: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidStoreURL) as refused:
        retry_knobs(query)
    assert str(refused.value) == message
    assert isinstance(refused.value, ValueError)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"connect_retries": 2.7}, "connect_retries must be an int >= 0, got 2.7"),
        ({"connect_retries": 2.0}, "connect_retries must be an int >= 0, got 2.0"),
        ({"retry_delay": math.inf}, "retry_delay must be a finite number of seconds >= 0, got inf"),
        ({"retry_delay": math.nan}, "retry_delay must be a finite number of seconds >= 0, got nan"),
        ({"retry_delay": False}, "retry_delay must be a finite number of seconds >= 0, got False"),
    ],
)
def test_keywords_are_never_coerced(knobs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as refused:
        retry_arguments(knobs, what="w", default_retries=1, default_delay=0.5)
    assert str(refused.value) == message


def test_an_infinite_url_delay_is_refused_by_retry_arguments() -> None:
    with pytest.raises(ValueError, match="retry_delay must be a finite number"):
        retry_arguments(
            retry_knobs({"retry_delay": "inf"}), what="w", default_retries=1, default_delay=0.5
        )


# Every first-party backend's from_url (sync and async), refused before any connection: the
# URLs name nothing reachable, and a bad knob must fail before the first attempt.
BACKEND_URLS = [
    "sqlite:///:memory:",
    "libsql+file:///:memory:",
    "rqlite://127.0.0.1:9",
    "postgresql://u:pw@127.0.0.1:9/db",
    "dynamodb://Table_1?local=true&endpoint_url=http://127.0.0.1:9",
    "mongodb://127.0.0.1:9/",
    "redis://127.0.0.1:9",
]
MISTAKES = [
    ("connect_retries=1.5", {}, "option connect_retries='1.5' must be an integer"),
    ("connect_retries=-1", {}, "option connect_retries=-1 must be >= 0"),
    ("retry_delay=abc", {}, "option retry_delay='abc' must be a number"),
    ("", {"connect_retries": 2.7}, "connect_retries must be an int >= 0, got 2.7"),
    ("", {"connect_retries": "3"}, "connect_retries must be an int >= 0, got '3'"),
    ("", {"retry_delay": -1}, "retry_delay must be a finite number of seconds >= 0, got -1"),
]


def _with_query(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}" if query else url


@pytest.mark.parametrize("url", BACKEND_URLS)
@pytest.mark.parametrize(("query", "keywords", "message"), MISTAKES)
@pytest.mark.anyio
async def test_every_backend_refuses_a_bad_retry_knob_with_the_same_message(
    url: str, query: str, keywords: dict[str, Any], message: str
) -> None:
    try:
        registry.backend_for_url(url)
    except (UnknownScheme, BackendUnavailable) as exc:  # not installed: its own tests cover it
        pytest.skip(f"no backend for {url}: {exc}")
    with pytest.raises(ValueError) as refused:
        registry.open_store(_with_query(url, query), **keywords)
    assert str(refused.value) == message
    with pytest.raises(ValueError) as arefused:
        await registry.open_async_store(_with_query(url, query), **keywords)
    assert str(arefused.value) == message


def test_busy_waits_end_at_the_deadline() -> None:
    assert next(busy_waits(0), False) is False  # no time at all: give up at once
    waits = list(busy_waits(30))  # 1 + 2 + 4 + 8 + 15 ms: a few pauses, then it ends
    assert waits and all(waits)
