"""What every backend would otherwise rewrite: codec, commit envelope, trace and listing
policy, URL parsing and redaction, connect retries."""

from harel.store.common.codec import (
    decode_event,
    decode_execution,
    decode_payload,
    dumps,
    encode_event,
    encode_execution,
    loads,
)
from harel.store.common.commit import (
    PreparedCommit,
    PreparedEmit,
    PreparedSpawn,
    cas_decision,
    collapse_timer_ops,
    committing,
    conflict,
)
from harel.store.common.drive import Plan, adrive, drive
from harel.store.common.lazy import lazy_exports
from harel.store.common.limits import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    MAX_DOCUMENT_BYTES,
    MAX_ID_BYTES,
    MAX_INT,
    MAX_NESTING_DEPTH,
    MIN_INT,
)
from harel.store.common.listing import (
    ListingQuery,
    decode_cursor,
    encode_cursor,
    listing_query,
    page_from_probe,
)
from harel.store.common.plan_store import (
    AsyncPlanStore,
    ContractPlan,
    PlanStore,
    in_settled_write,
)
from harel.store.common.records import (
    PreparedExecution,
    PreparedImport,
    prepare_import,
    record_content,
    record_digest,
    trim_record_trace,
)
from harel.store.common.retry import (
    RETRY_KNOBS,
    aconnect_with_retry,
    connect_with_retry,
    retry_arguments,
    retry_knobs,
)
from harel.store.common.schema_version import SchemaVerdict, release_of, schema_verdict
from harel.store.common.sweeps import sweep_limit
from harel.store.common.threaded import RunnerClosed, ThreadedAsyncStore, ThreadedRunner
from harel.store.common.trace import (
    decode_trace_step,
    encode_trace_step,
    next_trace_index,
    trace_keep_from,
)
from harel.store.common.urls import StoreURL, parse_store_url, redact_url
from harel.store.common.validate import (
    check_count,
    check_event_ref,
    check_flag,
    check_id,
    check_limit,
    check_now,
    check_path,
    check_prune,
    check_seq,
    check_timer_ref,
)

__all__ = [
    "DEFAULT_MAX_DOCUMENT_BYTES",
    "MAX_DOCUMENT_BYTES",
    "MAX_ID_BYTES",
    "MAX_INT",
    "MAX_NESTING_DEPTH",
    "MIN_INT",
    "RETRY_KNOBS",
    "AsyncPlanStore",
    "ContractPlan",
    "ListingQuery",
    "Plan",
    "PlanStore",
    "PreparedCommit",
    "PreparedEmit",
    "PreparedExecution",
    "PreparedImport",
    "PreparedSpawn",
    "RunnerClosed",
    "SchemaVerdict",
    "StoreURL",
    "ThreadedAsyncStore",
    "ThreadedRunner",
    "aconnect_with_retry",
    "adrive",
    "cas_decision",
    "check_count",
    "check_event_ref",
    "check_flag",
    "check_id",
    "check_limit",
    "check_now",
    "check_path",
    "check_prune",
    "check_seq",
    "check_timer_ref",
    "collapse_timer_ops",
    "committing",
    "conflict",
    "connect_with_retry",
    "decode_cursor",
    "decode_event",
    "decode_execution",
    "decode_payload",
    "decode_trace_step",
    "drive",
    "dumps",
    "encode_cursor",
    "encode_event",
    "encode_execution",
    "encode_trace_step",
    "in_settled_write",
    "lazy_exports",
    "listing_query",
    "loads",
    "next_trace_index",
    "page_from_probe",
    "parse_store_url",
    "prepare_import",
    "record_content",
    "record_digest",
    "redact_url",
    "release_of",
    "retry_arguments",
    "retry_knobs",
    "schema_verdict",
    "sweep_limit",
    "trace_keep_from",
    "trim_record_trace",
]
