"""The declarative backend spec: knobs parsed and checked once, legacy variables as data, the
spec as its own plugin."""

from __future__ import annotations

from typing import Any

import pytest
from harel.store.common.urls import StoreURL
from harel.store.contract import Capabilities
from harel.store.errors import InvalidStoreOption, InvalidStoreURL, PluginError, StoreConfigError
from harel.store.spec import BackendSpec, Knob, LegacyEnv, trace_max_knob


def _where(parsed: StoreURL) -> dict[str, Any]:
    return {"host": parsed.host, "extra": dict(parsed.query)}


SPEC = BackendSpec(
    name="toy",
    title="Toy",
    schemes=("toy",),
    url_forms=("toy://host",),
    store="toy_store.sync:ToyStore",
    async_store="toy_store.aio:AsyncToyStore",
    capabilities=Capabilities(
        persistent=True, multi_process=True, ordered_listing=True, exact_pages=True
    ),
    distribution="toy-store",
    location=_where,
    knobs=(
        trace_max_knob(),
        Knob("pool", int, 4, minimum=1, maximum=64),
        Knob("wait", float, 1.5, minimum=0),
        Knob("tls", bool, True),
        Knob("mode", str, "FAST", choices=("FAST", "SAFE")),
        Knob("auth_token", str, "", secret=True),
    ),
    passthrough=frozenset({"driver_opt"}),
    retry=(3, 0.25),
    legacy=LegacyEnv(url_vars=("TOY_URL", "OLD_TOY_URL"), knob_vars={"TOY_MODE": "mode"}),
)


def test_url_text_and_keywords_give_the_same_typed_values() -> None:
    arguments, retry = SPEC.open_args(
        "toy://h?pool=8&wait=2&tls=off&mode=safe&trace_max=none&driver_opt=x", {}
    )
    assert arguments == {
        "host": "h",
        "extra": {"driver_opt": "x"},
        "trace_max": None,
        "pool": 8,
        "wait": 2.0,
        "tls": False,
        "mode": "SAFE",
        "auth_token": "",
    }
    assert (retry["retries"], retry["delay"]) == (3, 0.25)
    keywords = {"pool": 8, "wait": 2, "tls": False, "mode": "safe", "trace_max": None}
    assert SPEC.knob_values(keywords) == {**SPEC.defaults, **keywords, "mode": "SAFE", "wait": 2.0}


def test_keywords_win_over_the_url() -> None:
    arguments, retry = SPEC.open_args(
        "toy://h?pool=8&connect_retries=9", {"pool": 2, "connect_retries": 0}
    )
    assert arguments["pool"] == 2 and retry["retries"] == 0


@pytest.mark.parametrize(
    ("url", "keywords", "message"),
    [
        ("toy://h?pool=0", {}, "option pool=0 must be an int >= 1 <= 64"),
        ("toy://h?pool=x", {}, "option pool='x' must be an int >= 1 <= 64"),
        ("toy://h", {"pool": True}, "option pool=True must be an int >= 1 <= 64"),
        ("toy://h", {"pool": 2.0}, "option pool=2.0 must be an int >= 1 <= 64"),
        ("toy://h?wait=nan", {}, "option wait=nan must be a number >= 0"),
        ("toy://h?tls=maybe", {}, "option tls='maybe' must be true or false"),
        ("toy://h", {"mode": "slow"}, "option mode='slow' must be one of FAST, SAFE"),
        ("toy://h?trace_max=-1", {}, "option trace_max=-1 must be an int >= 0 or None"),
        ("toy://h", {"auth_token": 5}, "option auth_token=*** must be a string"),
    ],
)
def test_one_message_per_bad_value(url: str, keywords: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidStoreOption) as refused:
        SPEC.open_args(url, keywords)
    assert str(refused.value) == message
    assert isinstance(refused.value, ValueError) and isinstance(refused.value, TypeError)


def test_a_misspelt_knob_gets_a_suggestion_from_the_url_and_from_keywords() -> None:
    with pytest.raises(
        InvalidStoreOption, match=r"unknown option\(s\) pol for a Toy store \(did you mean pool\?\)"
    ):
        SPEC.open_args("toy://h?pol=2", {})
    with pytest.raises(InvalidStoreOption, match=r"\(did you mean mode\?\)"):
        SPEC.knob_values({"mod": "FAST"})
    with pytest.raises(InvalidStoreOption, match="driver_opt"):  # passthrough is URL-only
        SPEC.knob_values({"driver_opt": "x"})


def test_a_wrong_scheme_names_the_forms_and_hides_the_password() -> None:
    with pytest.raises(InvalidStoreURL) as refused:
        SPEC.open_args("other://u:hunter22@h", {})
    assert "hunter22" not in str(refused.value) and "toy://host" in str(refused.value)


def test_a_secret_knob_must_have_a_name_redaction_recognises() -> None:
    with pytest.raises(PluginError, match="redacted"):
        Knob("word", str, "", secret=True)


def test_a_knob_declared_twice_or_shadowing_a_retry_knob_is_refused() -> None:
    for knobs in ((Knob("a", int, 1), Knob("a", int, 2)), (Knob("retry_delay", float, 1.0),)):
        with pytest.raises(PluginError, match="declared twice"):
            BackendSpec(**{**_fields(), "knobs": knobs})


def _fields() -> dict[str, Any]:
    names = ("name", "title", "schemes", "url_forms", "store", "async_store", "capabilities")
    return {
        **{name: getattr(SPEC, name) for name in names},
        "distribution": "d",
        "location": _where,
    }


def test_legacy_variables_as_data() -> None:
    legacy = SPEC.legacy
    assert legacy is not None
    assert legacy.url({}) is None
    assert legacy.url({"OLD_TOY_URL": "toy://b", "TOY_URL": " "}) == "toy://b"
    assert legacy.url({"OLD_TOY_URL": "toy://b", "TOY_URL": "toy://a"}) == "toy://a"
    assert (
        legacy.url({"TOY_URL": "toy://a?pool=2", "TOY_MODE": "SAFE"}) == "toy://a?pool=2&mode=SAFE"
    )
    with pytest.raises(StoreConfigError, match="TOY_MODE is set but TOY_URL or OLD_TOY_URL is not"):
        legacy.url({"TOY_MODE": "SAFE"})
    renamed = LegacyEnv(url_vars=("U",), schemes={"http": "toy"})
    assert renamed.url({"U": "http://h:1"}) == "toy://h:1"
    path = LegacyEnv(path_var="P", template="toy:///{}")
    assert path.url({"P": "/abs dir/x.db"}) == "toy:////abs%20dir/x.db"


def test_the_spec_is_its_own_plugin() -> None:
    registered: list[Any] = []
    SPEC.harel_register_stores(registered.append)
    (backend,) = registered
    assert (backend.name, backend.schemes, backend.distribution) == ("toy", ("toy",), "toy-store")
    assert backend.legacy_env == "toy_store._spec:SPEC.legacy_url"
    assert backend.legacy_vars == ("TOY_URL", "OLD_TOY_URL", "TOY_MODE")


def _pool_rule(values: dict[str, Any]) -> None:
    if values["low"] > values["high"]:
        raise InvalidStoreOption(f"low={values['low']} must be <= high={values['high']}")


RICH = BackendSpec(
    **{
        **_fields(),
        "knobs": (
            Knob("timeout", float, 5.0, above=0),
            Knob("auth_token", str, "", secret=True, aliases=("authToken",)),
            Knob("local", str, "false", choices=("false", "true", "moto")),
            Knob("low", int, 1, minimum=0),
            Knob("high", int, 10, minimum=1),
        ),
        "check": _pool_rule,
        "passthrough_any": True,
        "retry_for": lambda parsed, knobs: (
            (5, 0.2) if parsed.host or knobs["low"] > 3 else (0, 0.2)
        ),
        "legacy_env": "toy_store._legacy:url_from_env",
        "legacy_vars": ("TOY_DSN",),
    }
)


def test_an_exclusive_minimum_refuses_the_bound_itself() -> None:
    assert RICH.knob_values({"timeout": 0.5})["timeout"] == 0.5
    with pytest.raises(InvalidStoreOption, match=r"option timeout=0 must be a number > 0$"):
        RICH.knob_values({"timeout": 0})


def test_an_alias_is_the_same_knob_and_both_at_once_is_refused() -> None:
    arguments, _ = RICH.open_args("toy://h?authToken=s3", {})
    assert arguments["auth_token"] == "s3"
    assert RICH.knob_values({"authToken": "k"})["auth_token"] == "k"
    assert RICH.open_args("toy://h?authToken=s3", {"auth_token": "k"})[0]["auth_token"] == "k"
    with pytest.raises(InvalidStoreOption, match="given twice"):
        RICH.open_args("toy://h?authToken=s3&auth_token=k", {})


def test_a_choice_knob_takes_a_bool_as_its_true_or_false_choice() -> None:
    assert RICH.knob_values({"local": True})["local"] == "true"
    assert RICH.knob_values({"local": False})["local"] == "false"
    assert RICH.knob_values({"local": "MOTO"})["local"] == "moto"
    with pytest.raises(InvalidStoreOption, match="one of false, true, moto"):
        RICH.knob_values({"local": 1})


def test_a_rule_across_knobs_runs_on_keywords_and_on_the_url() -> None:
    with pytest.raises(InvalidStoreOption, match="low=5 must be <= high=2"):
        RICH.knob_values({"low": 5, "high": 2})
    with pytest.raises(InvalidStoreOption, match="low=5 must be <= high=3"):
        RICH.open_args("toy://h?low=5", {"high": 3})


def test_passthrough_any_hands_every_other_parameter_to_the_location() -> None:
    arguments, _ = RICH.open_args("toy://h?replicaSet=rs0&low=2&retry_delay=0.1", {})
    assert arguments["extra"] == {"replicaSet": "rs0"}
    assert arguments["low"] == 2


def test_the_retry_default_can_depend_on_the_url() -> None:
    assert RICH.open_args("toy://h", {}).retry["retries"] == 5
    assert RICH.open_args("toy:///file", {}).retry["retries"] == 0
    assert RICH.open_args("toy:///file?connect_retries=2", {}).retry["retries"] == 2
    assert RICH.open_args("toy:///file", {"low": 4}).retry["retries"] == 5, "knobs count"


def test_a_legacy_function_declares_the_variables_it_reads() -> None:
    backend = RICH.backend()
    assert (backend.legacy_env, backend.legacy_vars) == (
        "toy_store._legacy:url_from_env",
        ("TOY_DSN",),
    )


def test_a_backend_parser_reads_urls_the_standard_form_cannot() -> None:
    def hosts(url: str) -> StoreURL:
        head, _, query = url.partition("?")
        return StoreURL("toy", None, None, head[6:], None, "", dict([query.split("=")]), url)

    spec = BackendSpec(**{**_fields(), "parser": hosts, "knobs": (Knob("low", int, 1),)})
    arguments, _ = spec.open_args("toy://a:1,b:2?low=3", {})
    assert (arguments["host"], arguments["low"]) == ("a:1,b:2", 3)


def test_memory_alias_reads_the_two_slash_spelling_as_the_memory_file() -> None:
    from harel.store.spec import memory_alias

    normalize = memory_alias("toy")
    assert normalize("toy://:memory:?pool=2") == "toy:///:memory:?pool=2"
    assert normalize("TOY://:MEMORY:") == "toy:///:memory:"
    assert normalize("toy:///file.db") == "toy:///file.db"
    assert normalize(None) is None  # type: ignore[arg-type]  # the parser refuses it, not this


def test_a_url_knob_is_checked_once_and_a_keyword_that_overrides_it_once() -> None:
    calls: list[str] = []

    def note(value: str) -> str:
        calls.append(value)
        return value

    spec = BackendSpec(**{**_fields(), "knobs": (Knob("name", str, "d", check=note),)})
    assert spec.open_args("toy://h?name=url", {}).arguments["name"] == "url"
    assert calls == ["url"]
    calls.clear()
    assert spec.open_args("toy://h?name=url", {"name": "kw"}).arguments["name"] == "kw"
    assert calls == ["url", "kw"]  # the URL's text is checked when read, the winner once
    calls.clear()
    assert spec.knob_values({"name": "kw"})["name"] == "kw"
    assert calls == ["kw"]
