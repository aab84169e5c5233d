"""Everything a store backend is written with, in one place: the public API for store authors.

A backend imports from here (and, for the SQL family, from :mod:`harel.store.author.sql`), from
:mod:`harel.store.contract` (the contract's types) and :mod:`harel.store.errors` (its typed
errors) — nothing else of harel-core; the modules behind these names are private and may
change.  ``make test`` checks that every first-party backend keeps to this edge.  The shape a
backend folder takes (``_spec.py``, ``_plan.py``, ``sync.py``, ``aio.py``, ``testing.py``) is
described in harel-core's README ("Writing a backend") and the tutorial store
(``conformance/tutorial-store``); ``docs/store-author-api.md`` lists every name below with its
guarantee.

Groups:

* **Declaring the backend** — :class:`BackendSpec`, :class:`Knob`, :func:`trace_max_knob`,
  :class:`LegacyEnv`, :func:`memory_alias`, :class:`FromUrl`, :class:`AsyncFromUrl`,
  :class:`StoreURL`, :func:`parse_store_url`, :func:`lazy_exports`, :func:`needs_harel_testing`
  (a harness's lazy import of ``harel-testing``, the test-only distribution holding servers
  and stand-ins).
* **The store classes** — :class:`PlanStore` / :class:`AsyncPlanStore` (every contract method
  over one plan object), :class:`ThreadedAsyncStore` / :class:`SyncHops` (the async twin of a
  sync-only driver), :func:`drive` / :func:`adrive` (the plan loop), :func:`current_library`,
  :func:`in_settled_write`.
* **The commit rule** — :class:`PreparedCommit` (what a commit writes, validated and encoded),
  :class:`PreparedEmit`, :class:`PreparedSpawn`, :func:`cas_decision`, :func:`base_holds`,
  :func:`conflict`, :func:`already_processed`, :func:`refuse_lost`, :func:`resent_and_stored`,
  :func:`receipt_slot`, :data:`RECEIPT_WINDOW`.
* **Creating, importing, enqueueing** — :class:`PreparedExecution`, :class:`PreparedImport`,
  :func:`prepare_import`, :class:`PreparedEnqueue`.
* **Validating arguments** — ``check_*``, :func:`show`, :func:`sweep_limit`.
* **Encoding and decoding** — :func:`loads`, :func:`encode_checked`, ``decode_*``,
  :func:`encode_trace_step`, :func:`next_trace_index`, :func:`trace_keep_from`,
  :data:`MAX_DOCUMENT_BYTES`, :data:`MAX_INT`.
* **Listing** — :class:`ListingQuery`, :func:`page_from_probe`.
* **Work, claims and relays** — :class:`WorkRow`, :class:`WorkTouch`, :data:`PRIORITIES`,
  :func:`claim_order`, :func:`take_units`, :func:`lease_lost`, :func:`leases_in_order`,
  :func:`held_leases`, :func:`next_ready`, :func:`touch`, :func:`work_touches`,
  :func:`import_touches`, :func:`relay_due`, :func:`outbox_or_damaged`,
  :func:`spawn_or_damaged`.
* **Schema versions** — :func:`schema_verdict`, :data:`SchemaVerdict`, :func:`release_of`,
  :func:`open_flow` (the one open flow: probe, verdict, lock, create or upgrade, record) fed
  with a backend's :class:`OpenSteps` (each step a :data:`Step`), :class:`Stored`,
  :class:`OpenRaced`.
* **Connecting, retrying, redacting** — :func:`connect_with_retry`,
  :func:`aconnect_with_retry`, :func:`retry_arguments`, :func:`retry_knobs`,
  :data:`RETRY_KNOBS`, :func:`busy_waits`, :func:`redact_url`, :func:`redact_text`,
  :func:`scrub_secrets`.
* **Wake-ups** — :class:`Wakeups`, :class:`AsyncWakeups`, :func:`wait_in_thread`,
  :func:`unavailable`.
"""

from harel.store.common.claims import (
    PRIORITIES,
    WorkRow,
    WorkTouch,
    claim_order,
    held_leases,
    import_touches,
    lease_lost,
    leases_in_order,
    next_ready,
    outbox_or_damaged,
    relay_due,
    spawn_or_damaged,
    take_units,
    touch,
    work_touches,
)
from harel.store.common.codec import (
    decode_event,
    decode_execution,
    decode_payload,
    encode_checked,
    loads,
)
from harel.store.common.commit import (
    RECEIPT_WINDOW,
    PreparedCommit,
    PreparedEmit,
    PreparedSpawn,
    already_processed,
    base_holds,
    cas_decision,
    conflict,
    receipt_slot,
    refuse_lost,
    resent_and_stored,
)
from harel.store.common.drive import adrive, drive
from harel.store.common.enqueue import PreparedEnqueue
from harel.store.common.lazy import lazy_exports, needs_harel_testing
from harel.store.common.limits import MAX_DOCUMENT_BYTES, MAX_INT
from harel.store.common.listing import ListingQuery, page_from_probe
from harel.store.common.offload import current_library
from harel.store.common.open_flow import OpenRaced, OpenSteps, Step, Stored, open_flow
from harel.store.common.plan_store import AsyncPlanStore, PlanStore, in_settled_write
from harel.store.common.records import PreparedExecution, PreparedImport, prepare_import
from harel.store.common.retry import (
    RETRY_KNOBS,
    aconnect_with_retry,
    busy_waits,
    connect_with_retry,
    retry_arguments,
    retry_knobs,
)
from harel.store.common.schema_version import SchemaVerdict, release_of, schema_verdict
from harel.store.common.sweeps import sweep_limit
from harel.store.common.threaded import SyncHops, ThreadedAsyncStore
from harel.store.common.trace import (
    decode_trace_step,
    encode_trace_step,
    next_trace_index,
    trace_keep_from,
)
from harel.store.common.urls import (
    StoreURL,
    parse_store_url,
    redact_text,
    redact_url,
    scrub_secrets,
)
from harel.store.common.validate import (
    check_event_ref,
    check_flag,
    check_id,
    check_limit,
    check_now,
    check_prune,
    check_seq,
    check_timer_ref,
    show,
)
from harel.store.common.wakeups import AsyncWakeups, Wakeups, unavailable, wait_in_thread
from harel.store.spec import (
    AsyncFromUrl,
    BackendSpec,
    FromUrl,
    Knob,
    LegacyEnv,
    memory_alias,
    trace_max_knob,
)

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_INT",
    "PRIORITIES",
    "RECEIPT_WINDOW",
    "RETRY_KNOBS",
    "AsyncFromUrl",
    "AsyncPlanStore",
    "AsyncWakeups",
    "BackendSpec",
    "FromUrl",
    "Knob",
    "LegacyEnv",
    "ListingQuery",
    "OpenRaced",
    "OpenSteps",
    "PlanStore",
    "PreparedCommit",
    "PreparedEmit",
    "PreparedEnqueue",
    "PreparedExecution",
    "PreparedImport",
    "PreparedSpawn",
    "SchemaVerdict",
    "Step",
    "StoreURL",
    "Stored",
    "SyncHops",
    "ThreadedAsyncStore",
    "Wakeups",
    "WorkRow",
    "WorkTouch",
    "aconnect_with_retry",
    "adrive",
    "already_processed",
    "base_holds",
    "busy_waits",
    "cas_decision",
    "check_event_ref",
    "check_flag",
    "check_id",
    "check_limit",
    "check_now",
    "check_prune",
    "check_seq",
    "check_timer_ref",
    "claim_order",
    "conflict",
    "connect_with_retry",
    "current_library",
    "decode_event",
    "decode_execution",
    "decode_payload",
    "decode_trace_step",
    "drive",
    "encode_checked",
    "encode_trace_step",
    "held_leases",
    "import_touches",
    "in_settled_write",
    "lazy_exports",
    "lease_lost",
    "leases_in_order",
    "loads",
    "memory_alias",
    "needs_harel_testing",
    "next_ready",
    "next_trace_index",
    "open_flow",
    "outbox_or_damaged",
    "page_from_probe",
    "parse_store_url",
    "prepare_import",
    "receipt_slot",
    "redact_text",
    "redact_url",
    "refuse_lost",
    "relay_due",
    "release_of",
    "resent_and_stored",
    "retry_arguments",
    "retry_knobs",
    "schema_verdict",
    "scrub_secrets",
    "show",
    "spawn_or_damaged",
    "sweep_limit",
    "take_units",
    "touch",
    "trace_keep_from",
    "trace_max_knob",
    "unavailable",
    "wait_in_thread",
    "work_touches",
]
