"""Pure encodings that turn ids, paths and event ids into Redis keys and set members.

Three encodings, each injective, each written once here (the Lua scripts never build a key or
member from an id; they receive them, or read them back from data this module produced):

* :func:`key_part` — an id inside a *key name*: UTF-8 (lone surrogates passed through), then
  every byte outside ``[A-Za-z0-9._~-]`` percent-encoded.  The result never holds ``:``,
  ``{``, ``}``, ``*``, ``?``, ``[``, whitespace or NUL, so an id can neither reach into another
  key nor form a Redis Cluster hash tag.
* :func:`owner_prefix` / :func:`owned` — a *member* of the global sorted sets that belongs to
  one execution: ``esc(execution_id) + b"\\x00\\x01" + tag + item`` where ``esc`` doubles every
  NUL as ``\\x00\\xff``.  The prefix is self-delimiting (no other execution's members start
  with it) and byte order of members equals the order of ``(execution_id, item)`` tuples, so a
  zset sorted by score then member is sorted by ``(score, execution_id, item)``.
* :func:`group_member` / :func:`group_key` — the member that names a claim's *work group*:
  the execution's owner prefix, or :data:`UNTARGETED` (``owner_prefix("")``, which no
  execution can have: ids are never empty) for the untargeted outbox entries, whose owned
  members live under it too.
* :func:`seq_of` / :func:`stream_id` — a Redis Stream entry id ``<ms>-<n>`` as the contract's
  integer ``seq``: ``ms * 2**20 + n``.  Stream ids only grow, so seqs only grow.

UTF-8 byte order equals code-point order, so raw ids as lexicographic zset members sort like
Python strings.
"""

from __future__ import annotations

from harel.store.errors import StoreCorrupted

SEPARATOR = b"\x00\x01"
"""Ends the escaped execution id inside an owned member."""

_NUL = b"\x00"
_ESCAPED_NUL = b"\x00\xff"
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-")
_HEX = "0123456789ABCDEF"

TAG_MARK = b"m"
"""Owned member tag of a dedupe mark (item: the event id)."""
TAG_TIMER = b"t"
"""Owned member tag of an armed timer (item: the state path)."""
TAG_OUTBOX = b"o"
"""Owned member tag of an outbox entry targeted at the execution (item: the stream id)."""
TAG_SPAWN = b"s"
"""Owned member tag of a spawn intent the execution wrote (item: the stream id)."""

SEQ_SHIFT = 20
"""Bits of a seq that hold the stream id's per-millisecond counter."""
SEQ_COUNTER_LIMIT = 1 << SEQ_SHIFT
"""A stream id whose counter reaches this cannot be a seq (the commit script refuses it)."""
SEQ_MAX = (1 << 63) - 1
"""Seqs stay below 2**63 (until the year 2248), so they fit a signed 64-bit column."""


def text(value: str) -> bytes:
    """The bytes Redis stores for an id, path or event id (lone surrogates kept)."""
    return value.encode("utf-8", "surrogatepass")


def untext(raw: bytes) -> str:
    """Inverse of :func:`text`."""
    return raw.decode("utf-8", "surrogatepass")


def key_part(value: str) -> bytes:
    """``value`` percent-encoded for use inside a key name (injective, ASCII, no ``:``/``{``)."""
    out: list[str] = []
    for byte in text(value):
        if byte in _SAFE:
            out.append(chr(byte))
        else:
            out.append("%" + _HEX[byte >> 4] + _HEX[byte & 15])
    return "".join(out).encode("ascii")


def escape_nul(raw: bytes) -> bytes:
    """``raw`` with every NUL doubled as ``\\x00\\xff`` (order-preserving)."""
    return raw.replace(_NUL, _ESCAPED_NUL)


def owner_prefix(execution_id: str) -> bytes:
    """The prefix every owned member of ``execution_id`` starts with (and no other's does)."""
    return escape_nul(text(execution_id)) + SEPARATOR


def owned(execution_id: str, tag: bytes, item: str) -> bytes:
    """The owned member of one mark / timer of ``execution_id``."""
    return owner_prefix(execution_id) + tag + text(item)


def split_owned(member: bytes) -> tuple[str, bytes, bytes]:
    """``(execution_id, tag, item bytes)`` of an owned member; StoreCorrupted if malformed."""
    position = 0
    while True:
        found = member.find(_NUL, position)
        if found < 0 or found + 1 >= len(member):
            raise StoreCorrupted(f"owned member {member[:60]!r} has no execution id separator")
        if member[found + 1 : found + 2] == b"\x01":
            break
        if member[found + 1 : found + 2] != b"\xff":
            raise StoreCorrupted(f"owned member {member[:60]!r} holds a bad NUL escape")
        position = found + 2
    execution_id = untext(member[:found].replace(_ESCAPED_NUL, _NUL))
    rest = member[found + 2 :]
    if not rest:
        raise StoreCorrupted(f"owned member {member[:60]!r} has no tag")
    return execution_id, rest[:1], rest[1:]


UNTARGETED = SEPARATOR
"""The owner prefix of the untargeted outbox entries (the work group ``None``): the escaped
empty id and the separator, which no execution's prefix equals or starts with, and which sorts
before every one of them (as ``""`` sorts before every id)."""


def group_member(key: str | None) -> bytes:
    """The member naming the work group ``key`` (``None``: the untargeted outbox entries)."""
    return UNTARGETED if key is None else owner_prefix(key)


def group_key(member: bytes) -> str | None:
    """Inverse of :func:`group_member`; StoreCorrupted when ``member`` cannot be one."""
    if member == UNTARGETED:
        return None
    body = member[: -len(SEPARATOR)]
    if not member.endswith(SEPARATOR) or not body or _NUL in body.replace(_ESCAPED_NUL, b""):
        raise StoreCorrupted(f"work group member {member[:60]!r} is not an owner prefix")
    try:
        return untext(body.replace(_ESCAPED_NUL, _NUL))
    except UnicodeDecodeError:
        raise StoreCorrupted(f"work group member {member[:60]!r} is not UTF-8") from None


def stream_id(seq: int) -> bytes | None:
    """The stream entry id of ``seq``, or ``None`` when no entry can have it."""
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise TypeError(f"seq must be an int from a pending entry, got {seq!r}")
    if seq < 0 or seq > SEQ_MAX:
        return None
    return f"{seq >> SEQ_SHIFT}-{seq & (SEQ_COUNTER_LIMIT - 1)}".encode("ascii")


def seq_of(entry_id: bytes) -> int:
    """The seq of a stream entry id ``b"<ms>-<n>"``; StoreCorrupted if it cannot be one."""
    try:
        ms_text, n_text = entry_id.split(b"-")
        ms, n = int(ms_text), int(n_text)
    except ValueError:
        raise StoreCorrupted(f"stream entry id {entry_id[:40]!r} is not <ms>-<n>") from None
    if n >= SEQ_COUNTER_LIMIT or ms < 0 or n < 0:
        raise StoreCorrupted(f"stream entry id {entry_id!r} does not fit a seq")
    return (ms << SEQ_SHIFT) | n


def hash_tag(key: bytes) -> bytes | None:
    """The part of ``key`` Redis Cluster hashes to pick its slot, when it is not the whole
    key: what lies between the first ``{`` and the first ``}`` after it, if not empty."""
    start = key.find(b"{")
    if start < 0:
        return None
    end = key.find(b"}", start + 1)
    if end <= start + 1:
        return None
    return key[start + 1 : end]
