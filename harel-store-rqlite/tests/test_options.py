"""``from_url``'s ``connect_retries`` / ``retry_delay`` go through harel-core's ``retry_arguments``:
the URL's strings are parsed (and taken out of the URL the store is built from), keywords are
never coerced, a bad value is a ``ValueError`` naming the knob (the same message as on every
backend)."""

from __future__ import annotations

import math

import pytest
from harel_store_rqlite import RqliteStore
from harel_store_rqlite._options import make_options, open_options
from harel_store_rqlite._spec import SPEC


def test_retry_knobs_ride_in_the_url_or_as_keywords() -> None:
    url = "rqlite://u:p%40ss@h:4001/px?level=weak&connect_retries=3&retry_delay=0#f"
    options, retry = open_options(url, {"timeout": 2.0})
    assert options == make_options(url.partition("?")[0], level="weak", timeout=2.0)
    assert (options.base_url, options.auth) == ("http://h:4001/px", ("u", "p@ss"))
    assert (options.level, options.sweep_level, options.timeout) == ("weak", "weak", 2.0)
    assert (retry["retries"], retry["delay"]) == (3, 0.0)  # a delay of 0 is allowed now
    assert open_options("rqlite://h?retry_delay=1", {})[0] == make_options("rqlite://h")
    keyword = SPEC.open_args("rqlite://h?connect_retries=3", {"connect_retries": 0})[1]
    assert keyword["retries"] == 0 and "rqlite://h" in keyword["what"]
    defaults = SPEC.open_args("rqlite://h", {})[1]
    assert (defaults["retries"], defaults["delay"]) == (6, 0.25)


def test_a_bad_retry_knob_is_refused_whether_in_the_url_or_a_keyword() -> None:
    refusals = []
    for url, knobs in (
        ("rqlite://h?retry_delay=nan&level=weak", {}),
        ("rqlite://h", {"connect_retries": True}),
    ):
        with pytest.raises(ValueError) as refused:
            SPEC.open_args(url, knobs)
        refusals.append(str(refused.value))
    assert refusals == [
        "option retry_delay=nan must be >= 0.0",
        "connect_retries must be an int >= 0, got True",
    ]
    with pytest.raises(ValueError, match="finite"):  # refused before: "must be ... > 0"
        RqliteStore.from_url("rqlite://h", retry_delay=math.inf)
