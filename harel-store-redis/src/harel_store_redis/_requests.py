"""The requests every Redis plan sends, and the reply checks every plan shares.

A plan operation is a generator (:data:`Plan`) that yields :class:`Command` objects and is sent
each reply; ``sync.py`` and ``aio.py`` only execute them.  :func:`run_script` is the one way a
plan runs a Lua script: by SHA, re-sent with its source after ``NOSCRIPT``, refused before
sending when it is larger than the payload limit, and retried once on a lost connection when
the script is idempotent.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from harel.store.errors import PayloadTooLarge, StoreCorrupted, StoreUnavailable

from harel_store_redis._scripts import WRONG_TYPE, LuaScript

DEFAULT_MAX_PAYLOAD_BYTES = 512 * 1024 * 1024
"""Largest request one operation may send: Redis' default ``proto-max-bulk-len``."""


@dataclass(frozen=True, slots=True)
class Command:
    """One Redis command; ``wire`` is what the driver hands ``execute_command``."""

    wire: tuple[Any, ...]


def evalsha(script: LuaScript, keys: Sequence[bytes], args: Sequence[bytes]) -> Command:
    """Run a cached script by SHA."""
    return Command(("EVALSHA", script.sha, len(keys), *keys, *args))


def eval_source(script: LuaScript, keys: Sequence[bytes], args: Sequence[bytes]) -> Command:
    """Run a script from its source (and cache it on the server)."""
    return Command(("EVAL", script.source, len(keys), *keys, *args))


class ScriptMissing(Exception):
    """The server answered ``NOSCRIPT`` (the drivers' error mapping raises it into the plan)."""


class ReplyLost(StoreUnavailable):
    """The connection failed or timed out after the request may have reached the server: it
    may or may not have been executed.  The drivers' error mapping raises it into the plan
    (every other ``StoreUnavailable`` there means the request was not executed); the commit
    plan settles it by re-sending, other plans treat it as any ``StoreUnavailable``."""


T = TypeVar("T")

Plan: TypeAlias = Generator[Command, Any, T]
"""A sans-IO operation returning ``T``: yields commands, is sent each command's reply."""


def run_script(
    script: LuaScript,
    keys: Sequence[bytes],
    args: Sequence[bytes],
    *,
    retry_unavailable: bool = True,
    limit: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Plan[Any]:
    """One server call: ``EVALSHA``, falling back to ``EVAL`` after ``NOSCRIPT``.

    With ``retry_unavailable`` (idempotent scripts only) a connection or timeout failure is
    retried once on a fresh connection: a pooled connection the server closed while idle fails
    its first command.  Without it the failure propagates (a :class:`ReplyLost` when the
    request may have been executed).
    """
    size = sum(map(len, keys)) + sum(map(len, args))
    if size > limit:
        raise PayloadTooLarge(
            f"{script.name} would send {size} bytes to Redis, over the limit of {limit} bytes "
            "(max_payload_bytes; Redis refuses values over proto-max-bulk-len, 512 MiB by "
            "default): store less in the context, events or trace steps"
        )
    attempts = 2 if retry_unavailable else 1
    for attempt in range(attempts):
        try:
            try:
                return (yield evalsha(script, keys, args))
            except ScriptMissing:
                return (yield eval_source(script, keys, args))
        except StoreUnavailable:
            if attempt + 1 >= attempts:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _wrong_type(reply: Any, where: str) -> StoreCorrupted:
    key = reply[1] if isinstance(reply, list) and len(reply) > 1 else b"?"
    shown = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
    return StoreCorrupted(
        f"Redis key {shown[:200]!r} in {where} holds a value of another type than harel "
        "writes there (something else wrote under this prefix); nothing was written. Move the "
        "foreign key away or use another prefix"
    )


def guarded(reply: Any, where: str) -> Any:
    """``reply`` itself unless it is a script's wrong-type report (raised as StoreCorrupted)."""
    if isinstance(reply, list) and reply and reply[0] == WRONG_TYPE:
        raise _wrong_type(reply, where)
    return reply


def text_reply(reply: Any) -> str:
    """A status or bulk reply as text (for messages)."""
    return reply.decode("ascii", "replace") if isinstance(reply, bytes) else str(reply)


def number(value: float) -> bytes:
    """A score as Redis parses it exactly (``repr`` is the shortest exact decimal)."""
    return repr(float(value)).encode("ascii")
