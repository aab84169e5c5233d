"""The conformance kit: the store contract as a pytest suite any backend can run.

The same tests run against every first-party backend and against any third-party store.
Each test is written once and runs against both the sync and the async store class.

Three ways to run it
--------------------

1. **Subclass** (a backend's own tests).  Load the plugin from the ROOT ``conftest.py``
   (``pytest_plugins = ["harel.conformance.plugin"]``) or pass ``-p harel.conformance.plugin``,
   define a function-scoped ``harel_harness`` fixture returning a fresh, EMPTY
   :class:`StoreHarness` (and destroying it afterwards), and subclass the suite::

       # conftest.py
       pytest_plugins = ["harel.conformance.plugin"]

       @pytest.fixture
       def harel_harness(tmp_path):
           harness = MyHarness(tmp_path / "kit.db")   # capabilities = Capabilities(...)
           yield harness
           harness.destroy()

       # test_conformance.py
       from typing import ClassVar

       from harel.conformance import ConformanceSuite

       class TestMyStoreConformance(ConformanceSuite):
           expected_failures: ClassVar[dict[str, str]] = {
               "test_fire_at_bit_exact": "driver rounds doubles (#12)",
           }

   Single concerns (``ContractTests``, ``CommitTests``, ``DurabilityTests``,
   ``ConcurrencyTests``, ``TraceTests``, ``ListingTests``, ``TimerTests``, ``RelayTests``,
   ``ResendTests``, ``LostReplyTests``, ``NormalFormTests``, ``DedupeTests``,
   ``RetentionTests``, ``BadInputTests``, ``RoundTripTests``, ``ArgumentErrorTests``,
   ``CancellationTests``, ``StatefulTests``, ``RecordTests``,
   ``UnknownFieldTests``) can be subclassed on their own.

2. **By URL with pytest**: ``pytest -p harel.conformance.plugin --harel-store-url URL
   path/to/test_module.py`` where the module subclasses ``ConformanceSuite`` without defining
   ``harel_harness``: the plugin builds it with ``harel.registry.harness_for_url(URL, tmp)``.

3. **By URL from Python or the CLI**: ``run_conformance(URL, pytest_args)`` (and
   ``harel conformance URL``) runs the bundled suite module against the backend registered
   for the URL's scheme and returns pytest's exit code.  It works from any directory.  The
   URL is validated before pytest starts and never printed unredacted (not on pytest's
   command line, in test ids, tracebacks or captured output).

Options: ``--harel-strict`` turns capability skips into failures (first-party CI runs
strict); ``HYPOTHESIS_PROFILE=fast|thorough`` sizes the stateful test (default ``fast``).
Known deviations go in ``expected_failures: ClassVar[dict[str, str]] = {test name: reason}``
on the suite subclass:
they run as strict xfails and are counted in the terminal summary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harel.conformance._rewrite import register_suite_for_rewrite
from harel.conformance.harness import StoreHarness
from harel.conformance.urls import (
    backend_test_url,
    backend_test_url_or_skip,
    url_variable_for,
    usable_backend_names,
)

register_suite_for_rewrite()  # before any test module of the kit is imported

if TYPE_CHECKING:
    from harel.conformance.run import run_conformance
    from harel.conformance.suite import (
        ArgumentErrorTests,
        BadInputTests,
        CancellationTests,
        CommitTests,
        ConcurrencyTests,
        ConformanceSuite,
        ContractTests,
        DedupeTests,
        DurabilityTests,
        ListingTests,
        LostReplyTests,
        NormalFormTests,
        RecordTests,
        RelayTests,
        ResendTests,
        RetentionTests,
        RoundTripTests,
        StatefulTests,
        TimerTests,
        TraceTests,
        UnknownFieldTests,
    )

_SUITE_NAMES = frozenset(
    {
        "ArgumentErrorTests",
        "BadInputTests",
        "CancellationTests",
        "CommitTests",
        "ConcurrencyTests",
        "ConformanceSuite",
        "ContractTests",
        "DedupeTests",
        "DurabilityTests",
        "ListingTests",
        "LostReplyTests",
        "NormalFormTests",
        "RecordTests",
        "RelayTests",
        "ResendTests",
        "RetentionTests",
        "RoundTripTests",
        "StatefulTests",
        "TimerTests",
        "TraceTests",
        "UnknownFieldTests",
    }
)


def __getattr__(name: str) -> Any:
    # The suite needs pytest and hypothesis (the ``conformance`` extra); importing
    # ``harel.conformance.harness`` must not, so the suite is imported on first use.
    if name in _SUITE_NAMES:
        register_suite_for_rewrite()
        from harel.conformance import suite

        return getattr(suite, name)
    if name == "run_conformance":
        from harel.conformance.run import run_conformance

        return run_conformance
    raise AttributeError(f"module 'harel.conformance' has no attribute {name!r}")


__all__ = [
    "ArgumentErrorTests",
    "BadInputTests",
    "CancellationTests",
    "CommitTests",
    "ConcurrencyTests",
    "ConformanceSuite",
    "ContractTests",
    "DedupeTests",
    "DurabilityTests",
    "ListingTests",
    "LostReplyTests",
    "NormalFormTests",
    "RecordTests",
    "RelayTests",
    "ResendTests",
    "RetentionTests",
    "RoundTripTests",
    "StatefulTests",
    "StoreHarness",
    "TimerTests",
    "TraceTests",
    "UnknownFieldTests",
    "backend_test_url",
    "backend_test_url_or_skip",
    "run_conformance",
    "url_variable_for",
    "usable_backend_names",
]
