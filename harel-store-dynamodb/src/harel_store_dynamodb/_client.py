"""What both drivers hand ``session.client("dynamodb", ...)``: endpoint, credentials, config.

Timeouts bound every request (so a cancelled async commit waits at most that long for its
answer), botocore retries throttling and transient errors ``max_attempts`` times in its
"standard" mode.  Such a hidden retry may follow an earlier send that landed; a commit tells
from the answer's ``RetryAttempts`` and settles it by its receipt (:mod:`._commit_plan`).
"""

from __future__ import annotations

from typing import Any

from botocore.config import Config  # type: ignore[import-untyped, unused-ignore]

from harel_store_dynamodb._local import moto_endpoint
from harel_store_dynamodb._options import DynamoOptions

LOCAL_KEY = "harel-local"
"""The dummy access key id and secret used with ``local``: local servers accept any."""


def endpoint_of(options: DynamoOptions) -> str | None:
    """The endpoint to talk to (this process's moto server for ``local=moto``)."""
    if options.local == "moto" and options.endpoint_url is None:
        return moto_endpoint()
    return options.endpoint_url


def client_arguments(options: DynamoOptions, endpoint: str | None) -> dict[str, Any]:
    """Keyword arguments of ``client("dynamodb", **...)``: region, endpoint (``endpoint`` wins
    over the options'), credentials (dummy ones for ``local`` unless given) and config."""
    config = Config(
        connect_timeout=options.request_timeout,
        read_timeout=options.request_timeout,
        retries={"max_attempts": options.max_attempts, "mode": "standard"},
    )
    kwargs: dict[str, Any] = {"region_name": options.region_name, "config": config}
    if endpoint or options.endpoint_url:
        kwargs["endpoint_url"] = endpoint or options.endpoint_url
    key, secret = options.aws_access_key_id, options.aws_secret_access_key
    if key is None and options.is_local:
        key, secret = LOCAL_KEY, LOCAL_KEY
    if key is not None:
        kwargs.update(aws_access_key_id=key, aws_secret_access_key=secret)
    return kwargs
