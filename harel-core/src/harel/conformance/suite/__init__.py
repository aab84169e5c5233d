"""The conformance suite: test classes by concern, combined into :class:`ConformanceSuite`.

Subclass ``ConformanceSuite`` (or single concern classes) in a ``Test*`` class of your tests
and provide a function-scoped ``harel_harness`` fixture; see :mod:`harel.conformance`.
"""

from __future__ import annotations

from harel.conformance.suite._base import Kit, KitBase, SyncAsAsync
from harel.conformance.suite.bad_input import BadInputTests
from harel.conformance.suite.cancellation import CancellationTests
from harel.conformance.suite.claims import ClaimTests
from harel.conformance.suite.commits import CommitTests
from harel.conformance.suite.concurrency import ConcurrencyTests
from harel.conformance.suite.contract import ContractTests
from harel.conformance.suite.dedupe import DedupeTests
from harel.conformance.suite.durability import DurabilityTests
from harel.conformance.suite.enqueue import EnqueueTests
from harel.conformance.suite.errors import ArgumentErrorTests
from harel.conformance.suite.fences import FenceTests
from harel.conformance.suite.listing import ListingTests
from harel.conformance.suite.lost_reply import LostReplyTests
from harel.conformance.suite.normal_forms import NormalFormTests
from harel.conformance.suite.records import RecordTests
from harel.conformance.suite.relays import RelayTests
from harel.conformance.suite.resend import ResendTests
from harel.conformance.suite.retention import RetentionTests
from harel.conformance.suite.roundtrip import RoundTripTests
from harel.conformance.suite.stateful import StatefulTests
from harel.conformance.suite.timers import TimerTests
from harel.conformance.suite.trace import TraceTests
from harel.conformance.suite.unknown_fields import UnknownFieldTests


class ConformanceSuite(
    ContractTests,
    CommitTests,
    ResendTests,
    LostReplyTests,
    DurabilityTests,
    ConcurrencyTests,
    TraceTests,
    ListingTests,
    TimerTests,
    RelayTests,
    DedupeTests,
    FenceTests,
    RetentionTests,
    BadInputTests,
    RoundTripTests,
    ArgumentErrorTests,
    CancellationTests,
    StatefulTests,
    RecordTests,
    UnknownFieldTests,
    NormalFormTests,
    ClaimTests,
    EnqueueTests,
):
    """Every kit test.  Declare known deviations as
    ``expected_failures: ClassVar[dict[str, str]] = {test name: reason}``.

    A name may be a test's function name (both flavours and all parameters) or a full
    item name such as ``test_fire_at_bit_exact[async]``.
    """


__all__ = [
    "ArgumentErrorTests",
    "BadInputTests",
    "CancellationTests",
    "ClaimTests",
    "CommitTests",
    "ConcurrencyTests",
    "ConformanceSuite",
    "ContractTests",
    "DedupeTests",
    "DurabilityTests",
    "EnqueueTests",
    "FenceTests",
    "Kit",
    "KitBase",
    "ListingTests",
    "LostReplyTests",
    "NormalFormTests",
    "RecordTests",
    "RelayTests",
    "ResendTests",
    "RetentionTests",
    "RoundTripTests",
    "StatefulTests",
    "SyncAsAsync",
    "TimerTests",
    "TraceTests",
    "UnknownFieldTests",
]
