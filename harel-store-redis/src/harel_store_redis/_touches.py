"""The work touches of a write as the commit and import scripts take them (claims' work rows:
see :mod:`harel_store_redis._claims`)."""

from __future__ import annotations

from collections.abc import Iterable

from harel.store.author import WorkTouch

from harel_store_redis._keys import UNTARGETED
from harel_store_redis._requests import number
from harel_store_redis._schema import Keys
from harel_store_redis._wake import channel


def group_member(keys: Keys, key: str | None) -> bytes:
    """The member naming work group ``key`` in ``P work`` / ``P ready:<p>`` (the owner prefix,
    from the per-execution cache; :data:`~harel_store_redis._keys.UNTARGETED` for ``None``)."""
    return UNTARGETED if key is None else keys.of(key).owner


def touch_args(keys: Keys, touches: Iterable[WorkTouch]) -> list[bytes]:
    """The 4 ``ARGV`` items per work touch of the commit and import scripts: group member,
    ``repr(due)``, priority, own (``1``/``0``); then, when there is any, the wake-up channel
    the script publishes on (:func:`~harel_store_redis._wake.channel`)."""
    args: list[bytes] = []
    for change in touches:
        member = group_member(keys, change.key)
        args += [member, number(change.due), b"%d" % change.priority, b"1" if change.own else b"0"]
    if args:
        args.append(channel(keys))
    return args
