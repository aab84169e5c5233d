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
  :data:`SEQ_EXHAUSTED`, :data:`WRONG_TYPE`, :data:`ALREADY_EXISTS`,
  :data:`ALREADY_PROCESSED`) where the caller must decide something.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

CONFLICT, APPLIED, SEQ_EXHAUSTED, WRONG_TYPE, ALREADY_EXISTS, ALREADY_PROCESSED = 0, 1, 2, 3, 4, 5
"""Reply codes of the write scripts (:data:`ALREADY_PROCESSED`: the commit's dedupe mark is
already recorded, nothing was written)."""


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

_RELAY_WRITES = """
-- the commit and import scripts' KEYS: 1 execution hash, 2 trace list, 3 summaries,
-- 4 owned, 5 marks, 6 timers, 7 timer-at, 8 outbox, 9 spawns, 10.. listing indexes, then
-- (only when the write touches work rows) the work hash and the 5 ready zsets
-- the position of the work hash (nil: no touches) and the last listing index key
local function work_keys_at(n_touches)
  if n_touches > 0 then return #KEYS - 5, #KEYS - 6 end
  return nil, #KEYS
end
-- apply n touches from ARGV[a..] (4 each: member, due, priority, own 1/0), then wake the
-- idle workers: PUBLISH on the channel that follows them (not a key: no slot)
local function apply_touches(work_at, a, n)
  if not work_at then return end
  local R = {}
  for i = 1, 5 do R[i] = KEYS[work_at + i] end
  for i = 0, n - 1 do
    local b = a + 4 * i
    work_touch(KEYS[work_at], R, ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3] == '1')
  end
  redis.call('PUBLISH', ARGV[a + 4 * n], '')
end
-- the first key of KEYS holding a foreign type, among those need[i] does not rule out
-- (work_at: where the work hash is among the trailing keys, or nil)
local function foreign_write_key(need, work_at)
  local expected = {'hash', 'list', 'hash', 'zset', 'zset', 'zset', 'hash', 'stream', 'stream'}
  for i = 1, #KEYS do
    if need[i] ~= false then
      local t = redis.call('TYPE', KEYS[i])['ok']
      local want = expected[i] or (i == work_at and 'hash' or 'zset')
      if t ~= 'none' and t ~= want then return KEYS[i] end
    end
  end
  return nil
end
local outbox_ids, spawn_ids, overflow = {}, {}, false
-- XADD with an automatic id; an id whose counter does not fit a seq marks the write undone
local function relay(ids, key, ...)
  local entry_id = redis.call('XADD', key, '*', ...)
  local dash = string.find(entry_id, '-', 1, true)
  if tonumber(string.sub(entry_id, dash + 1)) >= 1048576 then overflow = true end
  ids[#ids + 1] = entry_id
  return entry_id
end
-- append the emitted event at ARGV[a .. a + 3] (t|u, target, the target's owner prefix or the
-- untargeted one, event JSON) to the outbox; its owned member (the caller indexes it)
local function emit_entry(a)
  local entry_id
  if ARGV[a] == 't' then
    entry_id = relay(outbox_ids, KEYS[8], 'e', ARGV[a + 3], 't', ARGV[a + 1], 'o', ARGV[a + 2])
  else
    entry_id = relay(outbox_ids, KEYS[8], 'e', ARGV[a + 3])
  end
  return ARGV[a + 2] .. 'o' .. entry_id
end
local function undo_relays()
  for _, e in ipairs(outbox_ids) do redis.call('XDEL', KEYS[8], e) end
  for _, e in ipairs(spawn_ids) do redis.call('XDEL', KEYS[9], e) end
end
"""
"""What the commit, enqueue and import scripts share: the type probe of the keys they write
(checked before the first write, like :data:`_TYPE_GUARD`), the relay entries they append
(undone when a stream id cannot be a seq), an emitted event's outbox entry, and the work
touches with their wake-up."""


_WORK = """
-- claims' work rows: W the work hash, R[p + 1] the ready zset of priority p; field m (a work
-- group member) = '<priority> <ready_at text> <owner or nothing>'
local function work_row(W, m)
  local v = redis.call('HGET', W, m)
  if not v then return nil end
  local p, at, holder = string.match(v, '^([0-4]) (%S+) (.*)$')
  return {p = p, at = at, holder = holder, raw = v}
end
-- write row m (was in tier old_p, or nowhere when nil) as priority p, ready_at, holder
local function work_put(W, R, m, old_p, p, at, holder)
  if old_p and old_p ~= p then redis.call('ZREM', R[tonumber(old_p) + 1], m) end
  redis.call('ZADD', R[tonumber(p) + 1], at, m)
  redis.call('HSET', W, m, p .. ' ' .. at .. ' ' .. holder)
end
local function work_drop(W, R, m, p)
  redis.call('ZREM', R[tonumber(p) + 1], m)
  redis.call('HDEL', W, m)
end
-- the touch rule: absent -> insert free at due; free -> ready_at = min(ready_at, due);
-- leased -> ready_at kept; own -> priority = p
local function work_touch(W, R, m, due, p, own)
  local row = work_row(W, m)
  if row and not row.p then  -- unreadable: rebuilt from this touch
    for i = 1, #R do redis.call('ZREM', R[i], m) end
    row = nil
  end
  if not row then return work_put(W, R, m, nil, p, due, '') end
  local np = own and p or row.p
  local at = row.at
  if row.holder == '' and tonumber(due) < tonumber(at) then at = due end
  if np ~= row.p or at ~= row.at then work_put(W, R, m, row.p, np, at, row.holder) end
end
-- the armed timers of group m, by path: {{path, fire_at text, fire_at}, ...}; the first
-- minimal fire_at (text) and the due ones (fire_at <= now)
local function group_timers(own, timer_at, timers, m, now)
  local first, first_x, due = nil, nil, {}
  for i, member in ipairs(redis.call('ZRANGEBYLEX', own, '[' .. m .. 't', '(' .. m .. 'u')) do
    local at = redis.call('HGET', timer_at, member) or redis.call('ZSCORE', timers, member)
    if at then
      local x = tonumber(at)
      if first == nil or x < first_x then first, first_x = at, x end
      if x <= now then due[#due + 1] = {string.sub(member, #m + 2), at, x, i} end
    end
  end
  return first, first_x, due
end
"""
"""What the claim scripts and the writes that touch work rows share (see
:mod:`harel_store_redis._schema`): read, write, drop and touch a work row (the
:func:`harel.store.author.touch` rule), and a group's timers."""

COMMIT = LuaScript(
    "commit",
    _WORK
    + _RELAY_WRITES
    + """
-- KEYS: 1 execution hash, 2 trace list, 3 summaries, 4 owned, 5 marks, 6 timers, 7 timer-at,
--       8 outbox, 9 spawns, 10.. the listing indexes the new state belongs to, then the
--       work hash and the 5 ready zsets when the commit touches work rows
-- ARGV: 1 expected version, 2 new version, 3 document, 4 token, 5 status, 6 summary JSON,
--       7 raw id, 8 owner prefix, 9 index keys (newline separated), 10 mark member or '',
--       11 commit time, 12 trace step or '', 13 trace_max (0 = unbounded), 14 emits,
--       15 spawns, 16 timer ops, 17 the receipt field of the new version (k0..k7), 18 work
--       touches, 19 the fence (the receipt the expected version must hold, '' for none),
--       20 the receipt field of the expected version; then 4 per emit (t|u, target, target
--       owner prefix or the untargeted one, event), 3 per spawn (child, root path, context),
--       3 per timer op (s|c, member, repr(fire_at)), 4 per touch (group member, repr(due),
--       priority, own 1/0), then the wake-up channel (only with touches)
-- refusals write nothing and reply {code, stored version, the receipt of the new version or
-- ''} (or {code} when nothing is stored), so the caller tells a re-sent commit that is
-- already stored by it: code 5 when the mark ARGV[10] is already recorded (checked first),
-- else 0 when the version is not ARGV[1] or the fence is set and the expected version's
-- receipt is not it
local exe = KEYS[1]
local cur = redis.call('HMGET', exe, 'v', ARGV[17], 'ix', ARGV[20])
local has_mark = ARGV[10] ~= ''
if has_mark then
  local t = redis.call('TYPE', KEYS[5])['ok']
  if t ~= 'none' and t ~= 'zset' then return {3, KEYS[5]} end
  if redis.call('ZSCORE', KEYS[5], ARGV[10]) then
    if cur[1] then return {5, cur[1], cur[2] or ''} end
    return {5}
  end
end
if cur[1] then
  if cur[1] ~= ARGV[1] or (ARGV[19] ~= '' and cur[4] ~= ARGV[19]) then
    return {0, cur[1], cur[2] or ''}
  end
elseif ARGV[1] ~= '0' then
  return {0}
end
local id, owner = ARGV[7], ARGV[8]
local n_emits, n_spawns, n_timers = tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])
local n_touches = tonumber(ARGV[18])
local work_at, last_index = work_keys_at(n_touches)
local moved = cur[3] ~= ARGV[9]
-- probe only the keys this commit writes (the hash was read above: a foreign type failed it;
-- the marks were probed with the dedupe check)
local need = {false, ARGV[12] ~= '', true, has_mark or n_timers + n_spawns + n_emits > 0,
              false, n_timers > 0, n_timers > 0, n_emits > 0, n_spawns > 0}
for i = 10, last_index do need[i] = moved end
local bad = foreign_write_key(need, work_at)
if bad then return {3, bad} end

local a = 21
local owned = {}
for i = 1, n_emits do
  owned[#owned + 1] = emit_entry(a)
  a = a + 4
end
for i = 1, n_spawns do
  local entry_id = relay(spawn_ids, KEYS[9], 'p', id, 'c', ARGV[a], 'r', ARGV[a + 1],
                         'x', ARGV[a + 2], 'o', owner)
  owned[#owned + 1] = owner .. 's' .. entry_id
  a = a + 3
end
if overflow then
  undo_relays()
  return {2}
end
for _, m in ipairs(owned) do redis.call('ZADD', KEYS[4], 0, m) end

redis.call('HSET', exe, 'v', ARGV[2], 'd', ARGV[3], ARGV[17], ARGV[4], 'st', ARGV[5],
           'ix', ARGV[9])
redis.call('HSET', KEYS[3], id, ARGV[6])
if moved then
  if cur[3] then
    for k in string.gmatch(cur[3], '[^\\n]+') do redis.call('ZREM', k, id) end
  end
  for i = 10, last_index do redis.call('ZADD', KEYS[i], 0, id) end
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
apply_touches(work_at, a, n_touches)
return {1}
""",
)

ENQUEUE = LuaScript(
    "enqueue",
    _WORK
    + _RELAY_WRITES
    + """
-- KEYS: a commit's 1 .. 9 for the target (only 4 owned and 8 outbox are written; the target's
--       hash and trace are declared, never read), then the work hash and the 5 ready zsets
-- ARGV: 1 .. 4 the entry as a commit's emit (t, raw target id, target owner prefix, event
--       JSON), 5 .. 8 the touch (group member, repr(due), priority, own 0), 9 the wake-up
--       channel
-- reply: {1, entry id}, {2} (the stream id cannot be a seq: nothing written) or {3, key}
local work_at = work_keys_at(1)
local need = {false, false, false, true, false, false, false, true, false}
local bad = foreign_write_key(need, work_at)
if bad then return {3, bad} end
local member = emit_entry(1)
if overflow then
  undo_relays()
  return {2}
end
redis.call('ZADD', KEYS[4], 0, member)
apply_touches(work_at, 5, 1)
return {1, outbox_ids[1]}
""",
)
"""A producer's enqueue: the outbox entry a commit writes for one emitted event, indexed in
``P own`` under the target, the target's work-row touch and the ``PUBLISH`` a commit with work
touches sends, in one script (atomic); the target's execution is never read."""

COMMIT_STATE = LuaScript(
    "commit_state",
    """
-- A commit with no side writes (no emit, spawn, timer, mark or trace step).
-- KEYS: 1 execution hash, 2 summaries
-- ARGV: 1 expected version, 2 new version, 3 document, 4 token, 5 status, 6 summary JSON,
--       7 raw id, 8 the listing index keys the new state belongs to (newline separated),
--       9 the receipt field of the new version (k0..k7), 10 the fence (the receipt the
--       expected version must hold, '' for none), 11 the receipt field of the expected
--       version; a lost CAS or fence replies as COMMIT's does
local cur = redis.call('HMGET', KEYS[1], 'v', ARGV[9], 'ix', ARGV[11])
if cur[1] then
  if cur[1] ~= ARGV[1] or (ARGV[10] ~= '' and cur[4] ~= ARGV[10]) then
    return {0, cur[1], cur[2] or ''}
  end
elseif ARGV[1] ~= '0' then
  return {0}
end
local moved = cur[3] ~= ARGV[8]
if moved then
  local function foreign(k, want)
    local t = redis.call('TYPE', k)['ok']
    return t ~= 'none' and t ~= want
  end
  if foreign(KEYS[2], 'hash') then return {3, KEYS[2]} end
  for k in string.gmatch(ARGV[8], '[^\\n]+') do
    if foreign(k, 'zset') then return {3, k} end
  end
  if cur[3] then
    for k in string.gmatch(cur[3], '[^\\n]+') do
      if foreign(k, 'zset') then return {3, k} end
    end
  end
end
-- the summary first: the execution hash was read above, so only this write can fail, and
-- it fails before anything is written
redis.call('HSET', KEYS[2], ARGV[7], ARGV[6])
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'd', ARGV[3], ARGV[9], ARGV[4], 'st', ARGV[5],
           'ix', ARGV[8])
if moved then
  if cur[3] then
    for k in string.gmatch(cur[3], '[^\\n]+') do redis.call('ZREM', k, ARGV[7]) end
  end
  for k in string.gmatch(ARGV[8], '[^\\n]+') do redis.call('ZADD', k, 0, ARGV[7]) end
end
return {1}
""",
)
"""The state-only commit: two declared keys and no type probe unless the listing indexes
move (status or definition changed, or an insert).  The index keys travel in ``ARGV``, like
the ones a commit leaves, which the full commit reads back from the hash too."""

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
-- KEYS: 1 stream, 2 owned; ARGV: 1 entry id, 2 owned tag ('o' or 's'), 3 the untargeted
-- owner prefix (an entry without an 'o' field is an untargeted outbox entry)
local bad = wrong_type({'stream', 'zset'})
if bad then return {3, bad} end
local found = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #found == 0 then return 0 end
local fields = found[1][2]
local prefix = ARGV[3]
for i = 1, #fields, 2 do
  if fields[i] == 'o' then prefix = fields[i + 1] end
end
redis.call('ZREM', KEYS[2], prefix .. ARGV[2] .. ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
return 1
""",
)

PURGE = LuaScript(
    "purge",
    _TYPE_GUARD
    + """
-- KEYS: 1 execution hash, 2 trace list, 3 summaries, 4 owned, 5 marks, 6 timers, 7 timer-at,
--       8 outbox, 9 spawns, 10 work, 11..15 ready zsets of priorities 0..4
-- ARGV: 1 raw id, 2 owner prefix (= its work group member), 3 force (1/0), 4.. the finished
--       statuses
local status = redis.call('HGET', KEYS[1], 'st')
if status and ARGV[3] ~= '1' then
  local finished = false
  for i = 4, #ARGV do if ARGV[i] == status then finished = true end end
  if not finished then return {0, status} end
end
local bad = wrong_type({'hash', 'list', 'hash', 'zset', 'zset', 'zset', 'hash', 'stream',
                        'stream', 'hash', 'zset', 'zset', 'zset', 'zset', 'zset'})
if bad then return {3, bad} end
local prefix = ARGV[2]
if redis.call('HDEL', KEYS[10], prefix) == 1 then
  for i = 11, 15 do redis.call('ZREM', KEYS[i], prefix) end
end
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

LAYOUT = LuaScript(
    "layout",
    """
-- KEYS: 1 layout hash, 2 schema string (version 1's record), 3.. the other global keys
-- ARGV: 1 the version to record in an empty namespace, 2 the release recording it
-- reply: {version found or false, its writer or false, 1 if this call created the layout,
-- and the shard count of a sharded layout (layout 5)}
local cur = redis.call('HMGET', KEYS[1], 'v', 'by', 'shards')
if cur[1] then return {cur[1], cur[2], 0, cur[3]} end
local old = redis.call('GET', KEYS[2])
if old then return {old, false, 0} end
for i = 3, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then return {false, false, 0} end
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'by', ARGV[2])
redis.call('SET', KEYS[2], ARGV[1])
return {false, false, 1}
""",
)
"""Read the layout version, creating the layout in an empty namespace (one atomic call, so
two processes opening an empty namespace at once both end up with one layout)."""

UPGRADE = LuaScript(
    "upgrade_layout",
    _TYPE_GUARD
    + """
-- KEYS: 1 layout hash, 2 schema string, 3 timers, 4 timer-at, 5 outbox, 6 spawns, 7 owned,
--       8 work, 9..13 ready zsets of priorities 0..4
-- ARGV: 1 from version, 2 to version, 3 the release, 4 the ready_at of relay work written
--       at the upgrade (repr of relay_due(upgrade time)), 5 the untargeted owner prefix
-- reply: {version now stored, its writer or false}
local cur = redis.call('HMGET', KEYS[1], 'v', 'by')
local found = cur[1] or redis.call('GET', KEYS[2])
if found ~= ARGV[1] then return {found, cur[2]} end
local bad = wrong_type({'hash', 'string', 'zset', 'hash', 'stream', 'stream', 'zset', 'hash',
                        'zset', 'zset', 'zset', 'zset', 'zset'})
if bad then return {3, bad} end
-- layout 4's work rows (priority 0 until the execution's next commit that touches its row):
-- a group's ready_at is its earliest timer, or relay_due(upgrade time) when it has relay
-- entries
local now, untargeted = ARGV[4], ARGV[5]
local ready = {}
local function lower(m, at)
  local x = tonumber(at)
  local r = ready[m]
  if not r or x < r[2] then ready[m] = {at, x} end
end
local start = 0
while true do
  local batch = redis.call('ZRANGE', KEYS[3], start, start + 999)
  for _, member in ipairs(batch) do
    local cut = string.find(member, '\\0\\1', 1, true)
    local at = redis.call('HGET', KEYS[4], member) or redis.call('ZSCORE', KEYS[3], member)
    if cut and at then lower(string.sub(member, 1, cut + 1), at) end
  end
  if #batch < 1000 then break end
  start = start + 1000
end
local function each_entry(stream, visit)
  local from, skip = '-', nil
  while true do
    local batch = redis.call('XRANGE', stream, from, '+', 'COUNT', 1000)
    for _, entry in ipairs(batch) do
      if entry[1] ~= skip then
        local owner = nil
        for i = 1, #entry[2], 2 do
          if entry[2][i] == 'o' then owner = entry[2][i + 1] end
        end
        visit(entry[1], owner)
      end
    end
    if #batch < 1000 then break end
    from = batch[#batch][1]
    skip = from
  end
end
each_entry(KEYS[5], function(entry_id, owner)
  if not owner then  -- untargeted: layout 4 indexes it under the untargeted owner prefix
    owner = untargeted
    redis.call('ZADD', KEYS[7], 0, owner .. 'o' .. entry_id)
  end
  lower(owner, now)
end)
each_entry(KEYS[6], function(entry_id, owner)
  if owner then lower(owner, now) end
end)
for m, r in pairs(ready) do
  if redis.call('HSETNX', KEYS[8], m, '0 ' .. r[1] .. ' ') == 1 then
    redis.call('ZADD', KEYS[9], r[1], m)
  end
end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'by', ARGV[3])
redis.call('SET', KEYS[2], ARGV[2])
return {ARGV[2], ARGV[3]}
""",
)
"""Layout 1, 2 or 3 -> 4 when the stored version (``P layout``'s, or version 1's ``P schema``)
is still ``from``: backfill a work row for every group that has armed timers (ready at its
earliest ``fire_at``) or pending relay entries (ready at ``relay_due`` of the upgrade time,
as a commit then would date them), index the
untargeted outbox entries under :data:`~harel_store_redis._keys.UNTARGETED`, then record the
new version and the release in ``P layout`` and in ``P schema`` (what a release reading only
``P schema`` refuses by number).  One script, so atomic: concurrent openers find it done and
report the stored version.  No execution is rewritten: a hash written by layout 2 has no
receipts yet (its next commit writes them) and keeps its unused ``c`` field."""

_CLAIM_KEYS = """
local W = KEYS[1]
local R = {KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]}
local bad = wrong_type({'hash', 'zset', 'zset', 'zset', 'zset', 'zset', 'zset', 'hash', 'zset',
                        'stream', 'stream'})
if bad then return {3, bad} end
"""
"""KEYS of the claim scripts: 1 work, 2..6 ready zsets of priorities 0..4, 7 owned,
8 timer-at, 9 timers, 10 outbox, 11 spawns (renew declares the first 6)."""

_WORK_KEYS = """
-- KEYS: 1 work, 2..6 ready zsets of priorities 0..4
local bad = wrong_type({'hash', 'zset', 'zset', 'zset', 'zset', 'zset'})
if bad then return {3, bad} end
local W, R = KEYS[1], {KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]}
"""
"""KEYS of the scripts that declare only the work rows (renew, leases), type-checked."""

RELAY_UNITS = """
-- the relay entries of group m under tag (o: outbox, s: spawns; upper: the next tag; KEYS[7]
-- the owned index), in seq order, at most n, only those up to cut ({ms, n} of an entry id)
-- when cut is given, skipping members whose entry is gone
local function relay_units(stream, m, tag, upper, n, cut)
  local taken = {}
  if n <= 0 then return taken end
  local ids = {}
  for _, member in ipairs(redis.call('ZRANGEBYLEX', KEYS[7], '[' .. m .. tag,
                                     '(' .. m .. upper)) do
    local entry_id = string.sub(member, #m + 2)
    local ms, c = string.match(entry_id, '^(%d+)-(%d+)$')
    if ms then
      ms, c = tonumber(ms), tonumber(c)
      if not cut or ms < cut[1] or (ms == cut[1] and c <= cut[2]) then
        ids[#ids + 1] = {entry_id, ms, c}
      end
    end
  end
  table.sort(ids, function(a, b)
    if a[2] ~= b[2] then return a[2] < b[2] end
    return a[3] < b[3]
  end)
  for _, e in ipairs(ids) do
    if #taken >= n then break end
    local found = redis.call('XRANGE', stream, e[1], e[1])
    if #found > 0 then taken[#taken + 1] = found[1] end
  end
  return taken
end
"""
"""The claim scripts' relay-entry reader (single-slot and sharded: ``cut`` only there)."""

CLAIM = LuaScript(
    "claim",
    _TYPE_GUARD
    + _WORK
    + _CLAIM_KEYS
    + """
-- ARGV: 1 now (repr), 2 the lease's expiry (repr of now + lease), 3 owner, 4 limit,
--       5 PRIORITY_AGING
-- reply: {1, claim, ...}, a claim = {group member, priority, {path, fire_at, ...} due timers
--   taken, {{entry id, fields}, ...} outbox entries taken, same for spawn intents}
local now, expiry, owner, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local t_now, aging = tonumber(now), tonumber(ARGV[5])
-- byte order of members (Lua's '<' on strings follows the server's locale)
local function bytes_less(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
"""
    + RELAY_UNITS
    + """
local rows = {}
for p = 0, 4 do
  local found = redis.call('ZRANGEBYSCORE', R[p + 1], '-inf', now, 'WITHSCORES', 'LIMIT', 0,
                           limit)
  for i = 1, #found, 2 do
    rows[#rows + 1] = {found[i], tostring(p), tonumber(found[i + 1]) - aging * p}
  end
end
table.sort(rows, function(a, b)
  if a[3] ~= b[3] then return a[3] < b[3] end
  return bytes_less(a[1], b[1])
end)
local budget = limit
local out = {1}
for _, row in ipairs(rows) do
  if budget <= 0 then break end
  local m, p = row[1], row[2]
  local spawns = relay_units(KEYS[11], m, 's', 't', budget)
  local outbox = relay_units(KEYS[10], m, 'o', 'p', budget - #spawns)
  local first, _, due = group_timers(KEYS[7], KEYS[8], KEYS[9], m, t_now)
  table.sort(due, function(a, b)
    if a[3] ~= b[3] then return a[3] < b[3] end
    return a[4] < b[4]
  end)
  local timers = {}
  for i = 1, math.min(#due, budget - #spawns - #outbox) do
    timers[#timers + 1] = due[i][1]
    timers[#timers + 1] = due[i][2]
  end
  local units = #spawns + #outbox + #timers / 2
  if units == 0 then  -- an early row: nothing is due behind it
    if first then work_put(W, R, m, p, p, first, '') else work_drop(W, R, m, p) end
  else
    work_put(W, R, m, p, p, expiry, owner)
    out[#out + 1] = {m, p, timers, outbox, spawns}
    budget = budget - units
  end
end
return out
""",
)
"""One claim in one script: up to ``limit`` ready rows of each priority (``ZRANGEBYSCORE``),
merged in claim order (rank, then member bytes, as
:func:`~harel.store.author.claim_order`), each group's units read through ``P own`` until the
unit budget is spent; an early row is re-dated to its earliest timer (or dropped), a claimed
one leased (``ready_at`` = the expiry, ``owner``).  Scores and the rank are compared as
doubles (exact), never printed by Lua: every time written is a text from ``ARGV`` or the
store."""

RENEW = LuaScript(
    "renew",
    _TYPE_GUARD
    + _WORK
    + _WORK_KEYS
    + """
-- ARGV: 1 group member, 2 owner, 3 now (repr), 4 the new expiry (repr of now + lease)
-- reply: {1} renewed, or {0, the row as stored or false}
local row = work_row(W, ARGV[1])
if not row or not row.p or row.holder ~= ARGV[2] or tonumber(row.at) <= tonumber(ARGV[3]) then
  return {0, row and row.raw or false}
end
work_put(W, R, ARGV[1], row.p, row.p, ARGV[4], ARGV[2])
return {1}
""",
)

RELEASE = LuaScript(
    "release",
    _TYPE_GUARD
    + _WORK
    + _CLAIM_KEYS
    + """
-- ARGV: 1 group member, 2 owner, 3 now (repr), 4 retry_at (repr) or '', 5 the ready_at of
--       relay work written now (repr of relay_due(now)), 6 the wake-up channel, 7 (sharded
--       layout, optional) '1' when the group has relay units in another shard
-- reply: {1} released and dropped, {1, 1, 1 if the row stays for units of this shard or 0}
-- released and re-dated, or {0, the row as stored or false}
local m, now, relay_at = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[5])
local row = work_row(W, m)
if not row or not row.p or row.holder ~= ARGV[2] then return {0, row and row.raw or false} end
-- next_ready: the earliest timer; relay units are due at once (relay_due(now)); not before
-- retry_at
local ready, x = group_timers(KEYS[7], KEYS[8], KEYS[9], m, now)
local relay = redis.call('ZRANGEBYLEX', KEYS[7], '[' .. m .. 'o', '(' .. m .. 't', 'LIMIT', 0, 1)
local here = ready ~= nil or #relay > 0
if (#relay > 0 or ARGV[7] == '1') and (ready == nil or relay_at < x) then
  ready, x = ARGV[5], relay_at
end
if ready == nil then
  work_drop(W, R, m, row.p)
  return {1}
end
if ARGV[4] ~= '' and tonumber(ARGV[4]) > x then ready = ARGV[4] end
work_put(W, R, m, row.p, row.p, ready, '')
redis.call('PUBLISH', ARGV[6], '')
return {1, 1, here and 1 or 0}
""",
)
"""Give a lease back: the row is re-dated from what is left (its earliest timer, or
``relay_due(now)`` when relay entries remain; not before ``retry_at``) and idle workers are
woken (``PUBLISH``), or the row is dropped when nothing is left."""

LEASES = LuaScript(
    "leases",
    _TYPE_GUARD
    + _WORK
    + _WORK_KEYS
    + """
-- ARGV: 1 now (repr), 2 n: the held rows to find per tier at most
-- reply: {1, {full_0, .., full_4}, {member, priority, ready_at text, holder}, ...}: each tier's
-- first n held rows (holder set, ready_at > now) by (ready_at, member); full_p = 1 when tier
-- p stopped at n (it may hold more)
local now, n = ARGV[1], tonumber(ARGV[2])
local t_now = tonumber(now)
local out = {1, {}}
for p = 0, 4 do
  local found, offset = 0, 0
  while found < n do
    local page = redis.call('ZRANGEBYSCORE', R[p + 1], '(' .. now, '+inf', 'LIMIT', offset, n)
    for _, m in ipairs(page) do
      local row = work_row(W, m)
      if row and row.p and row.holder ~= '' and tonumber(row.at) > t_now then
        out[#out + 1] = {m, row.p, row.at, row.holder}
        found = found + 1
        if found == n then break end
      end
    end
    if #page < n then break end
    offset = offset + n
  end
  out[2][p + 1] = found == n and 1 or 0
end
return out
""",
)
"""``list_leases``' read, writing nothing: per tier, the rows dated after ``now`` in score order,
kept while held, until ``n`` are found or the tier ends.  No structure holds the held rows
alone, so the walk also passes the free rows dated after ``now`` (work due later) before the
``n``-th held one, every one of them in a tier holding fewer."""

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

EXPORT = LuaScript(
    "export_execution",
    """
-- KEYS: 1 execution hash, 2 trace list, 3 summaries, 4 owned, 5 marks, 6 timers, 7 timer-at,
--       8 outbox, 9 spawns
-- ARGV: 1 raw id, 2 owner prefix
-- reply: {document or false, summary or false, trace list, {member, value, ...}} where the
--   value of a mark is its score, of a timer its exact fire_at text, of an outbox entry or a
--   spawn intent its stream entry's fields (false when the member has nothing behind it)
local prefix = ARGV[2]
local n = #prefix
local rows = {}
for _, m in ipairs(redis.call('ZRANGEBYLEX', KEYS[4], '[' .. prefix, '(' .. prefix .. '\\255')) do
  local tag = string.sub(m, n + 1, n + 1)
  local value = false
  if tag == 'm' then
    value = redis.call('ZSCORE', KEYS[5], m)
  elseif tag == 't' then
    value = redis.call('HGET', KEYS[7], m) or redis.call('ZSCORE', KEYS[6], m)
  elseif tag == 'o' or tag == 's' then
    local entry_id = string.sub(m, n + 2)
    local found = redis.call('XRANGE', KEYS[tag == 'o' and 8 or 9], entry_id, entry_id)
    if #found > 0 then value = found[1][2] end
  end
  rows[#rows + 1] = m
  rows[#rows + 1] = value
end
return {redis.call('HGET', KEYS[1], 'd'), redis.call('HGET', KEYS[3], ARGV[1]),
        redis.call('LRANGE', KEYS[2], 0, -1), rows}
""",
)
"""Everything stored for one id, read by one script (so from one consistent state)."""

IMPORT = LuaScript(
    "import_execution",
    _WORK
    + _RELAY_WRITES
    + """
-- KEYS: 1 execution hash, 2 trace list, 3 summaries, 4 owned, 5 marks, 6 timers, 7 timer-at,
--       8 outbox, 9 spawns, 10.. the listing indexes (when the record holds an execution),
--       then the work hash and the 5 ready zsets when the import touches work rows
-- ARGV: 1 with execution (1/0), 2 raw id, 3 owner prefix, 4 version, 5 document, 6 token,
--       7 status, 8 summary JSON, 9 index keys (newline separated), 10 next trace index,
--       11 marks, 12 timers, 13 emits, 14 spawns, 15 trace steps, 16 the receipt field of
--       the version (k0..k7, '' without an execution), 17 work touches; then 2 per mark
--       (member, score), 2 per timer (member, repr(fire_at)), 1 per emit (event JSON), 3 per
--       spawn (child, root path, context), 1 per trace step ('<index> <step JSON>'), 4 per
--       touch (group member, repr(due), priority, own 1/0), then the wake-up channel (only
--       with touches)
local with_exe = ARGV[1] == '1'
if with_exe and redis.call('EXISTS', KEYS[1]) == 1 then
  return {4, redis.call('HGET', KEYS[1], ARGV[16]) or ''}
end
local n_touches = tonumber(ARGV[17])
local work_at, last_index = work_keys_at(n_touches)
local bad = foreign_write_key({}, work_at)
if bad then return {3, bad} end

local id, owner = ARGV[2], ARGV[3]
local n_marks, n_timers = tonumber(ARGV[11]), tonumber(ARGV[12])
local n_emits, n_spawns, n_steps = tonumber(ARGV[13]), tonumber(ARGV[14]), tonumber(ARGV[15])
local marks_at = 18
local timers_at = marks_at + 2 * n_marks
local emits_at = timers_at + 2 * n_timers
local spawns_at = emits_at + n_emits
local steps_at = spawns_at + 3 * n_spawns
local touches_at = steps_at + n_steps
for i = 0, n_emits - 1 do
  relay(outbox_ids, KEYS[8], 'e', ARGV[emits_at + i], 't', id, 'o', owner)
end
for i = 0, n_spawns - 1 do
  local b = spawns_at + 3 * i
  relay(spawn_ids, KEYS[9], 'p', id, 'c', ARGV[b], 'r', ARGV[b + 1], 'x', ARGV[b + 2],
        'o', owner)
end
if overflow then
  undo_relays()
  return {2}
end
for _, e in ipairs(outbox_ids) do redis.call('ZADD', KEYS[4], 0, owner .. 'o' .. e) end
for _, e in ipairs(spawn_ids) do redis.call('ZADD', KEYS[4], 0, owner .. 's' .. e) end
apply_touches(work_at, touches_at, n_touches)
if not with_exe then return {1} end

redis.call('HSET', KEYS[1], 'v', ARGV[4], 'd', ARGV[5], ARGV[16], ARGV[6], 'st', ARGV[7],
           'ix', ARGV[9], 'tn', ARGV[10])
redis.call('HSET', KEYS[3], id, ARGV[8])
for i = 10, last_index do redis.call('ZADD', KEYS[i], 0, id) end
for i = 0, n_marks - 1 do
  local b = marks_at + 2 * i
  redis.call('ZADD', KEYS[5], ARGV[b + 1], ARGV[b])
  redis.call('ZADD', KEYS[4], 0, ARGV[b])
end
for i = 0, n_timers - 1 do
  local b = timers_at + 2 * i
  redis.call('ZADD', KEYS[6], ARGV[b + 1], ARGV[b])
  redis.call('HSET', KEYS[7], ARGV[b], ARGV[b + 1])
  redis.call('ZADD', KEYS[4], 0, ARGV[b])
end
redis.call('DEL', KEYS[2])
for i = 0, n_steps - 1 do redis.call('RPUSH', KEYS[2], ARGV[steps_at + i]) end
return {1}
""",
)
"""One record in one atomic script: the execution's absence is checked inside it (two
importers racing: one wins, the other writes nothing); relays get new stream ids, in record
order, after every existing one."""

SCRIPTS: tuple[LuaScript, ...] = (
    COMMIT,
    COMMIT_STATE,
    ENQUEUE,
    APPEND_TRACE,
    DELETE_TIMER,
    ACK,
    PURGE,
    PRUNE,
    LAYOUT,
    UPGRADE,
    CLAIM,
    RENEW,
    RELEASE,
    LEASES,
    EXPORT,
    IMPORT,
    LOAD,
    LOAD_FOR_EVENT,
    IS_PROCESSED,
    READ_TRACE,
    PENDING,
    DUE_TIMERS,
    LIST,
)
"""Every script, loaded into the server's script cache when a store opens."""
