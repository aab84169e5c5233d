"""The Lua scripts of the Redis store: one per operation, each one atomic server call.

They are the plan's data (see :mod:`harel_store_redis._plan`): sent by SHA with ``EVALSHA``,
re-sent with ``EVAL`` after ``NOSCRIPT``.  Conventions:

* every key arrives in ``KEYS`` and every value in ``ARGV``; a script never builds a key or
  member from an id (the listing-index keys it reads back from the ``ix`` field and the owner
  prefixes it reads back from stream entries were built by :mod:`harel_store_redis._keys`);
* scores travel as the exact decimal texts Python's ``repr`` made and are handed to Redis as
  strings, never through Lua numbers (which print only 14 digits);
* a write script checks, before its first write, that no key holds a foreign type (Redis does
  not roll a failing script back, so a ``WRONGTYPE`` after a write would tear the operation);
* replies are arrays whose first element is a code (:data:`APPLIED`, :data:`CONFLICT`,
  :data:`SEQ_EXHAUSTED`, :data:`WRONG_TYPE`) where the caller must decide something.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

CONFLICT, APPLIED, SEQ_EXHAUSTED, WRONG_TYPE = 0, 1, 2, 3
"""Reply codes of the write scripts."""


@dataclass(frozen=True, slots=True)
class LuaScript:
    """One Lua script: its name (for messages) and source; ``sha`` is what ``EVALSHA`` takes."""

    name: str
    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())


_TYPE_GUARD = """
local function wrong_type(expected)
  for i = 1, #expected do
    local t = redis.call('TYPE', KEYS[i])['ok']
    if t ~= 'none' and t ~= expected[i] then return KEYS[i] end
  end
  return nil
end
"""
"""Checked before a script's first write: a key of a foreign type would fail mid-script,
after earlier writes, and Redis scripts do not roll back."""

COMMIT = LuaScript(
    "commit",
    _TYPE_GUARD
    + """
-- KEYS: 1 execution hash, 2 trace list, 3 summaries, 4 owned, 5 marks, 6 timers, 7 timer-at,
--       8 outbox, 9 spawns, 10.. the listing indexes the new state belongs to
-- ARGV: 1 expected version, 2 new version, 3 document, 4 token, 5 status, 6 summary JSON,
--       7 raw id, 8 owner prefix, 9 index keys (newline separated), 10 mark member or '',
--       11 commit time, 12 trace step or '', 13 trace_max (0 = unbounded), 14 emits,
--       15 spawns, 16 timer ops; then 4 per emit (t|u, target, target owner prefix, event),
--       3 per spawn (child, root path, context), 3 per timer op (s|c, member, repr(fire_at))
local exe = KEYS[1]
local cur = redis.call('HMGET', exe, 'v', 'c', 'ix')
if cur[1] then
  if cur[1] ~= ARGV[1] then return {0, cur[1], cur[2] or ''} end
elseif ARGV[1] ~= '0' then
  return {0}
end
local expected = {'hash', 'list', 'hash', 'zset', 'zset', 'zset', 'hash', 'stream', 'stream'}
for i = 10, #KEYS do expected[i] = 'zset' end
local bad = wrong_type(expected)
if bad then return {3, bad} end

local id, owner = ARGV[7], ARGV[8]
local n_emits, n_spawns, n_timers = tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])
local a = 17
local outbox_ids, spawn_ids, owned = {}, {}, {}
local overflow = false
local function check(entry_id)
  local dash = string.find(entry_id, '-', 1, true)
  if tonumber(string.sub(entry_id, dash + 1)) >= 1048576 then overflow = true end
  return entry_id
end
for i = 1, n_emits do
  local entry_id
  if ARGV[a] == 't' then
    entry_id = check(redis.call('XADD', KEYS[8], '*', 'e', ARGV[a + 3], 't', ARGV[a + 1],
                                'o', ARGV[a + 2]))
    owned[#owned + 1] = ARGV[a + 2] .. 'o' .. entry_id
  else
    entry_id = check(redis.call('XADD', KEYS[8], '*', 'e', ARGV[a + 3]))
  end
  outbox_ids[#outbox_ids + 1] = entry_id
  a = a + 4
end
for i = 1, n_spawns do
  local entry_id = check(redis.call('XADD', KEYS[9], '*', 'p', id, 'c', ARGV[a],
                                    'r', ARGV[a + 1], 'x', ARGV[a + 2], 'o', owner))
  spawn_ids[#spawn_ids + 1] = entry_id
  owned[#owned + 1] = owner .. 's' .. entry_id
  a = a + 3
end
if overflow then
  for _, e in ipairs(outbox_ids) do redis.call('XDEL', KEYS[8], e) end
  for _, e in ipairs(spawn_ids) do redis.call('XDEL', KEYS[9], e) end
  return {2}
end
for _, m in ipairs(owned) do redis.call('ZADD', KEYS[4], 0, m) end

redis.call('HSET', exe, 'v', ARGV[2], 'd', ARGV[3], 'c', ARGV[4], 'st', ARGV[5], 'ix', ARGV[9])
redis.call('HSET', KEYS[3], id, ARGV[6])
if cur[3] ~= ARGV[9] then
  if cur[3] then
    for k in string.gmatch(cur[3], '[^\\n]+') do redis.call('ZREM', k, id) end
  end
  for i = 10, #KEYS do redis.call('ZADD', KEYS[i], 0, id) end
end
if ARGV[10] ~= '' then
  redis.call('ZADD', KEYS[5], ARGV[11], ARGV[10])
  redis.call('ZADD', KEYS[4], 0, ARGV[10])
end
for i = 1, n_timers do
  local member = ARGV[a + 1]
  if ARGV[a] == 's' then
    redis.call('ZADD', KEYS[6], ARGV[a + 2], member)
    redis.call('HSET', KEYS[7], member, ARGV[a + 2])
    redis.call('ZADD', KEYS[4], 0, member)
  else
    redis.call('ZREM', KEYS[6], member)
    redis.call('HDEL', KEYS[7], member)
    redis.call('ZREM', KEYS[4], member)
  end
  a = a + 3
end
if ARGV[12] ~= '' then
  local index = redis.call('HINCRBY', exe, 'tn', 1) - 1
  redis.call('RPUSH', KEYS[2], index .. ' ' .. ARGV[12])
  local keep = tonumber(ARGV[13])
  if keep > 0 then redis.call('LTRIM', KEYS[2], -keep, -1) end
end
return {1}
""",
)

APPEND_TRACE = LuaScript(
    "append_trace",
    _TYPE_GUARD
    + """
-- KEYS: 1 execution hash, 2 trace list; ARGV: 1 step, 2 trace_max (0 = unbounded)
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local bad = wrong_type({'hash', 'list'})
if bad then return {3, bad} end
local index = redis.call('HINCRBY', KEYS[1], 'tn', 1) - 1
redis.call('RPUSH', KEYS[2], index .. ' ' .. ARGV[1])
local keep = tonumber(ARGV[2])
if keep > 0 then redis.call('LTRIM', KEYS[2], -keep, -1) end
return 1
""",
)

DELETE_TIMER = LuaScript(
    "delete_timer",
    _TYPE_GUARD
    + """
-- KEYS: 1 timers, 2 timer-at, 3 owned; ARGV: 1 member, 2 repr(fire_at)
local bad = wrong_type({'zset', 'hash', 'zset'})
if bad then return {3, bad} end
local at = redis.call('HGET', KEYS[2], ARGV[1])
if not at or tonumber(at) ~= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1
""",
)
"""Compare-and-delete in one call: a timer re-armed since the sweep read it survives.
``tonumber`` parses both texts exactly (strtod), so ``-0.0`` equals ``0.0`` as in Python."""

ACK = LuaScript(
    "ack",
    _TYPE_GUARD
    + """
-- KEYS: 1 stream, 2 owned; ARGV: 1 entry id, 2 owned tag ('o' or 's')
local bad = wrong_type({'stream', 'zset'})
if bad then return {3, bad} end
local found = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #found == 0 then return 0 end
local fields = found[1][2]
for i = 1, #fields, 2 do
  if fields[i] == 'o' then redis.call('ZREM', KEYS[2], fields[i + 1] .. ARGV[2] .. ARGV[1]) end
end
redis.call('XDEL', KEYS[1], ARGV[1])
return 1
""",
)

PURGE = LuaScript(
    "purge",
    _TYPE_GUARD
    + """
-- KEYS: 1 execution hash, 2 trace list, 3 summaries, 4 owned, 5 marks, 6 timers, 7 timer-at,
--       8 outbox, 9 spawns
-- ARGV: 1 raw id, 2 owner prefix, 3 force (1/0), 4.. the finished statuses
local status = redis.call('HGET', KEYS[1], 'st')
if status and ARGV[3] ~= '1' then
  local finished = false
  for i = 4, #ARGV do if ARGV[i] == status then finished = true end end
  if not finished then return {0, status} end
end
local bad = wrong_type({'hash', 'list', 'hash', 'zset', 'zset', 'zset', 'hash', 'stream',
                        'stream'})
if bad then return {3, bad} end
local prefix = ARGV[2]
local lo, hi = '[' .. prefix, '(' .. prefix .. '\\255'
local n = #prefix
for _, m in ipairs(redis.call('ZRANGEBYLEX', KEYS[4], lo, hi)) do
  local tag = string.sub(m, n + 1, n + 1)
  if tag == 'm' then
    redis.call('ZREM', KEYS[5], m)
  elseif tag == 't' then
    redis.call('ZREM', KEYS[6], m)
    redis.call('HDEL', KEYS[7], m)
  elseif tag == 'o' then
    redis.call('XDEL', KEYS[8], string.sub(m, n + 2))
  elseif tag == 's' then
    redis.call('XDEL', KEYS[9], string.sub(m, n + 2))
  end
end
redis.call('ZREMRANGEBYLEX', KEYS[4], lo, hi)
local ix = redis.call('HGET', KEYS[1], 'ix')
if ix then
  for k in string.gmatch(ix, '[^\\n]+') do redis.call('ZREM', k, ARGV[1]) end
end
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[2])
return {1, redis.call('DEL', KEYS[1])}
""",
)

PRUNE = LuaScript(
    "prune_processed",
    _TYPE_GUARD
    + """
-- KEYS: 1 marks, 2 owned; ARGV: 1 exclusive max score '(<older_than>', 2 batch size
local bad = wrong_type({'zset', 'zset'})
if bad then return {3, bad} end
local batch = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, m in ipairs(batch) do
  redis.call('ZREM', KEYS[1], m)
  redis.call('ZREM', KEYS[2], m)
end
return #batch
""",
)

SCHEMA = LuaScript(
    "schema",
    """
-- KEYS: 1 schema, 2.. the other global keys; ARGV: 1 the version to record in a new namespace
local found = redis.call('GET', KEYS[1])
if found then return found end
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then return false end
end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
""",
)

LOAD = LuaScript("load", "return redis.call('HGET', KEYS[1], 'd')")

LOAD_FOR_EVENT = LuaScript(
    "load_for_event",
    "return {redis.call('HGET', KEYS[1], 'd'), redis.call('ZSCORE', KEYS[2], ARGV[1])}",
)

IS_PROCESSED = LuaScript("is_processed", "return redis.call('ZSCORE', KEYS[1], ARGV[1])")

READ_TRACE = LuaScript("read_trace", "return redis.call('LRANGE', KEYS[1], 0, -1)")

PENDING = LuaScript(
    "pending",
    """
-- KEYS: 1 stream; ARGV: 1 count ('' = all)
if ARGV[1] == '' then return redis.call('XRANGE', KEYS[1], '-', '+') end
return redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', ARGV[1])
""",
)

DUE_TIMERS = LuaScript(
    "due_timers",
    """
-- KEYS: 1 timers, 2 timer-at; ARGV: 1 max score, 2 count ('' = all)
local due
if ARGV[2] == '' then
  due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES')
else
  due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
end
local out = {}
for i = 1, #due, 2 do
  out[#out + 1] = due[i]
  out[#out + 1] = due[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], due[i])
end
return out
""",
)

LIST = LuaScript(
    "list_executions",
    """
-- KEYS: 1 summaries, 2.. one listing index per arm; ARGV: 1 lex min, 2 probe size
local arms = {}
for i = 2, #KEYS do
  local rows = {}
  for _, id in ipairs(redis.call('ZRANGEBYLEX', KEYS[i], ARGV[1], '+', 'LIMIT', 0, ARGV[2])) do
    rows[#rows + 1] = id
    rows[#rows + 1] = redis.call('HGET', KEYS[1], id)
  end
  arms[#arms + 1] = rows
end
return arms
""",
)

SCRIPTS: tuple[LuaScript, ...] = (
    COMMIT,
    APPEND_TRACE,
    DELETE_TIMER,
    ACK,
    PURGE,
    PRUNE,
    SCHEMA,
    LOAD,
    LOAD_FOR_EVENT,
    IS_PROCESSED,
    READ_TRACE,
    PENDING,
    DUE_TIMERS,
    LIST,
)
"""Every script, loaded into the server's script cache when a store opens."""
