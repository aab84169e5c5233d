"""``from_url``'s ``connect_retries`` / ``retry_delay`` go through harel-core's ``retry_arguments``:
the URL's strings are parsed, keywords are never coerced, a bad value is a ``ValueError``
naming the knob (the same message as on every backend), never showing the secret key."""

from __future__ import annotations

import math

import pytest
from harel_store_dynamodb import DynamoDBStore
from harel_store_dynamodb._spec import SPEC

URL = "dynamodb://AK:dynamo-s3cret@Table_1?endpoint_url=http://127.0.0.1:9&local=true"


def test_retry_knobs_ride_in_the_url_or_as_keywords() -> None:
    arguments, retry = SPEC.open_args(f"{URL}&connect_retries=1&retry_delay=0.1", {"trace_max": 3})
    assert arguments["table"] == "Table_1" and arguments["trace_max"] == 3
    assert "connect_retries" not in arguments
    assert (retry["retries"], retry["delay"]) == (1, 0.1)
    assert "Table_1" in retry["what"] and "dynamo-s3cret" not in retry["what"]
    keyword = SPEC.open_args(f"{URL}&retry_delay=0.1", {"retry_delay": 0}).retry
    assert (keyword["retries"], keyword["delay"]) == (4, 0.0)
    assert "retry_delay" not in SPEC.parse_url(f"{URL}&retry_delay=0.1")[1]


def test_a_bad_retry_knob_is_refused_without_the_secret_key() -> None:
    messages = {
        "option connect_retries='1.5' must be an integer": (f"{URL}&connect_retries=1.5", {}),
        "retry_delay must be a finite number of seconds >= 0, got nan": (
            URL,
            {"retry_delay": math.nan},
        ),
    }
    for message, (url, knobs) in messages.items():  # nan used to pass (nan < 0 is false)
        with pytest.raises(ValueError) as refused:
            DynamoDBStore.from_url(url, **knobs)
        assert str(refused.value) == message and "dynamo-s3cret" not in message
