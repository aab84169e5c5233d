"""retry_arguments (every from_url's retry wiring) and lazy_exports (every backend's package)."""

from __future__ import annotations

import sys
import types

import pytest
from harel.store.common.lazy import lazy_exports
from harel.store.common.retry import retry_arguments
from harel.store.errors import StoreUnavailable


def test_retry_arguments_defaults_and_knobs() -> None:
    defaults = retry_arguments({}, what="w", default_retries=3, default_delay=0.5)
    assert defaults == {"retries": 3, "delay": 0.5, "retry_on": (StoreUnavailable,), "what": "w"}
    given = retry_arguments(
        {"connect_retries": 0, "retry_delay": 2}, what="w", default_retries=3, default_delay=0.5
    )
    assert given["retries"] == 0 and given["delay"] == 2.0


@pytest.mark.parametrize(
    ("knobs", "name"),
    [
        ({"connect_retries": -1}, "connect_retries"),
        ({"connect_retries": True}, "connect_retries"),
        ({"connect_retries": "3"}, "connect_retries"),
        ({"retry_delay": -0.1}, "retry_delay"),
        ({"retry_delay": "1"}, "retry_delay"),
    ],
)
def test_retry_arguments_refuse_bad_knobs(knobs: dict[str, object], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        retry_arguments(knobs, what="w", default_retries=3, default_delay=0.5)


def test_lazy_exports_import_on_first_access_and_cache() -> None:
    package = types.ModuleType("harel_lazy_probe")
    target = types.ModuleType("harel_lazy_probe_target")
    target.Thing = object()  # type: ignore[attr-defined]
    sys.modules["harel_lazy_probe"] = package
    sys.modules["harel_lazy_probe_target"] = target
    try:
        getter = lazy_exports("harel_lazy_probe", {"Thing": "harel_lazy_probe_target"})
        assert getter("Thing") is target.Thing
        assert package.Thing is target.Thing
        with pytest.raises(AttributeError, match="no attribute 'Other'"):
            getter("Other")
    finally:
        del sys.modules["harel_lazy_probe"], sys.modules["harel_lazy_probe_target"]
