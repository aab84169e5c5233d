"""``from_url``'s ``connect_retries`` / ``retry_delay`` go through harel-core's ``retry_arguments``:
the URL's strings are parsed, keywords are never coerced, a bad value is a ``ValueError``
naming the knob (the same message as on every backend)."""

from __future__ import annotations

from pathlib import Path

import pytest
from harel_store_sqlite import SqliteStore
from harel_store_sqlite._spec import SPEC, parse_sqlite_url


def test_retry_knobs_ride_in_the_url_or_as_keywords(tmp_path: Path) -> None:
    arguments, retry = SPEC.open_args("sqlite:///x.db?connect_retries=3&retry_delay=0.25", {})
    assert arguments == {"path": "x.db", **SPEC.defaults}
    assert (retry["retries"], retry["delay"]) == (3, 0.25)
    _, overridden = SPEC.open_args("sqlite:///x.db?connect_retries=3", {"connect_retries": 1})
    assert overridden["retries"] == 1
    defaults = SPEC.open_args("sqlite:///x.db", {})[1]
    assert (defaults["retries"], defaults["delay"]) == (0, 0.5)
    # the store's own knobs never carry them: the constructor does not retry
    assert parse_sqlite_url("sqlite:///x.db?connect_retries=3&trace_max=4") == (
        "x.db",
        {"trace_max": 4},
    )
    store = SqliteStore.from_url(f"sqlite:///{tmp_path / 'a.db'}?connect_retries=2", retry_delay=0)
    store.close()


def test_a_bad_retry_knob_is_refused_before_the_file_is_made(tmp_path: Path) -> None:
    target = tmp_path / "never.db"
    mistakes = [
        (f"sqlite:///{target}?retry_delay=-1", {}),
        (f"sqlite:///{target}", {"connect_retries": 2.7}),
    ]
    for url, keywords in mistakes:  # 2.7 used to become 2 retries
        with pytest.raises(ValueError, match=r"^(option )?(retry_delay|connect_retries)\b"):
            SqliteStore.from_url(url, **keywords)
    assert not target.exists()
