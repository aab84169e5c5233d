"""Driver exceptions -> :mod:`harel.store.errors` (shared by the boto3 and aioboto3 drivers).

Both drivers raise botocore's exception classes (aiobotocore translates aiohttp's connection
errors into them), so one mapping serves both.  Messages name the table and the operation,
never a credential; the original exception is chained for debugging.
"""

from __future__ import annotations

import asyncio

from botocore import exceptions as boto  # type: ignore[import-untyped, unused-ignore]
from harel.store.errors import (
    InvalidPayload,
    PayloadTooLarge,
    StoreConfigError,
    StoreError,
    StoreUnavailable,
)

from harel_store_dynamodb._requests import (
    ConditionFailed,
    ItemBusy,
    RequestInDoubt,
    TableInUse,
    TableNotFound,
    TransactionCancelled,
)

BUSY_ERROR_CODES = frozenset(
    {
        "TransactionConflictException",
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "LimitExceededException",
    }
)
"""Refusals of the whole request (nothing applied by this send): :class:`ItemBusy`."""
RETRYABLE_CODES = frozenset({"TransactionInProgressException"})
"""Transient, but not a refusal: a transaction with the same ``ClientRequestToken`` is still
being applied (an earlier send of ours may yet land)."""
IN_DOUBT_CODES = frozenset({"InternalServerError", "InternalFailure", "ServiceUnavailable"})
CREDENTIAL_CODES = frozenset(
    {
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "AccessDeniedException",
        "ExpiredTokenException",
        "MissingAuthenticationTokenException",
        "IncompleteSignature",
        "InvalidClientTokenId",
    }
)
NOT_SENT = (boto.EndpointConnectionError, boto.ConnectTimeoutError)
SENT = (boto.ReadTimeoutError, boto.ConnectionClosedError, boto.ResponseStreamingError)


def _client_error(exc: boto.ClientError, table: str, operation: str) -> StoreError:
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    message = str(error.get("Message", ""))
    where = f"DynamoDB {operation} on table {table!r}"
    # botocore may have sent the request more than once (its own retries): an earlier send
    # may have been applied even though this answer refuses the request
    retried = int(exc.response.get("ResponseMetadata", {}).get("RetryAttempts") or 0) > 0
    if code == "TransactionCanceledException":
        reasons = exc.response.get("CancellationReasons") or []
        return TransactionCancelled([dict(reason) for reason in reasons], retried=retried)
    if code == "ConditionalCheckFailedException":
        return ConditionFailed(exc.response.get("Item"), retried=retried)
    if code == "ResourceNotFoundException":
        return TableNotFound(
            f"{where}: the table does not exist (check the table name and region, or open the "
            "store with create_table=true)"
        )
    if code == "ResourceInUseException":
        return TableInUse(f"{where}: the table is being created or deleted; retry shortly")
    if code in BUSY_ERROR_CODES:
        return ItemBusy(
            f"{where} was refused as busy ({code}); retry with backoff", retried=retried
        )
    if code in RETRYABLE_CODES:
        return RequestInDoubt(f"{where}: {code}, an identical request is still in progress")
    if code in IN_DOUBT_CODES:
        return RequestInDoubt(f"{where} failed on the server side ({code}); retry")
    if code in CREDENTIAL_CODES:
        return StoreConfigError(
            f"{where} was refused ({code}): check the AWS credentials and the IAM permissions "
            "of this process"
        )
    if code == "ValidationException":
        if "size" in message.lower():
            return PayloadTooLarge(f"{where} exceeds a DynamoDB size limit: {message}")
        return InvalidPayload(f"{where} was rejected by DynamoDB: {message}")
    return StoreError(f"{where} failed ({code}): {message}")


def map_error(exc: BaseException, *, table: str, operation: str) -> BaseException:
    """The :mod:`harel.store.errors` exception for a failed client call (``exc`` is chained).

    ``asyncio.CancelledError`` and other ``BaseException``s that are not errors pass through.
    """
    if not isinstance(exc, Exception):
        return exc
    where = f"DynamoDB {operation} on table {table!r}"
    if isinstance(exc, boto.ClientError):
        return _client_error(exc, table, operation)
    if isinstance(exc, NOT_SENT):
        return StoreUnavailable(f"{where}: the endpoint cannot be reached ({exc})")
    if isinstance(exc, SENT):
        return RequestInDoubt(f"{where}: the connection was lost before the answer ({exc})")
    if isinstance(exc, boto.NoCredentialsError | boto.PartialCredentialsError):
        return StoreConfigError(
            f"{where}: no usable AWS credentials; set them in the environment or profile, or "
            "pass local=true for a local DynamoDB-compatible server"
        )
    if isinstance(exc, boto.NoRegionError):
        return StoreConfigError(f"{where}: no AWS region; add ?region=... to the store URL")
    if isinstance(exc, boto.ParamValidationError):
        return InvalidPayload(f"{where}: the request was refused before sending ({exc})")
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return RequestInDoubt(f"{where} timed out")
    if isinstance(exc, boto.BotoCoreError | OSError):
        return StoreUnavailable(f"{where} failed: {exc}")
    if type(exc).__module__.split(".", 1)[0] in {"aiohttp", "urllib3"}:
        return RequestInDoubt(f"{where}: the connection failed ({exc})")
    return exc
