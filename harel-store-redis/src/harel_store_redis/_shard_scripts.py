"""The Lua scripts of the sharded layout (layout 5): the writes that append relay entries with
ids from each shard's clock, and the sweeps and claim steps that read one shard.

Every script here runs in ONE shard (all its keys carry the shard's hash tag); the plans of
:mod:`harel_store_redis._shards` send one per shard an operation touches.  The single-slot
scripts of :mod:`harel_store_redis._scripts` serve everything else, with a shard's key names.

**The shard clock.** Field ``clock`` of a shard's work hash (``P{tag}work``; never a work
group member, which always ends with ``\\x00\\x01``) holds a stream id ``<ms>-<n>``: the
highest id the shard issued, or a *cut* it promised to stay above.  A write appends its relay
entries with explicit ids, each the smallest id above ``max(clock, the caller's floor)`` and
not below the server's ``TIME`` (a hybrid logical clock), whose ``n`` is ``µs * 1024 +
counter * 64 + shard`` (``µs`` 0-999 within the millisecond, ``counter`` 0-15, ``shard``
0-63): the seq (``ms * 2**20 + n``) names its shard in its low 6 bits.  A sweep's or a claim's
first call on a shard returns the shard's *cut*, ``max(clock, floor, TIME - 1 µs)``, and
stores it as the clock, so every entry the shard appends later has a seq above the cut.
"""

from __future__ import annotations

from harel_store_redis._scripts import (
    _RELAY_WRITES,
    _TYPE_GUARD,
    _WORK,
    COMMIT,
    ENQUEUE,
    IMPORT,
    RELAY_UNITS,
    LuaScript,
)

_HLC = """
-- the shard clock: ids '<ms>-<n>', n = us * 1024 + counter * 64 + shard
local function id_parts(id)
  local ms, n = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(n)
end
local function id_text(ms, n) return string.format('%.0f-%.0f', ms, n) end
local function id_later(ams, an, bms, bn) return ams > bms or (ams == bms and an > bn) end
-- the smallest id of shard s above (ms, n)
local function id_next(ms, n, s)
  local u, c, r = math.floor(n / 1024), math.floor((n % 1024) / 64), n % 64
  if u < 1000 then
    if s > r then return ms, u * 1024 + c * 64 + s end
    if c < 15 then return ms, u * 1024 + (c + 1) * 64 + s end
    if u < 999 then return ms, (u + 1) * 1024 + s end
  end
  return ms + 1, s
end
-- max(the stored clock of work hash W, the caller's floor ('' or an id))
local function clock_floor(W, floor)
  local ms, n = 0, 0
  local stored = redis.call('HGET', W, 'clock')
  if stored then ms, n = id_parts(stored) end
  if floor ~= '' then
    local fms, fn = id_parts(floor)
    if id_later(fms, fn, ms, n) then ms, n = fms, fn end
  end
  return ms, n, stored
end
-- the server's time as (ms, microseconds within the millisecond)
local function clock_now()
  local t = redis.call('TIME')
  local us = tonumber(t[2])
  return tonumber(t[1]) * 1000 + math.floor(us / 1000), us % 1000
end
-- a sweep's or claim's cut of work hash W: max(clock, floor, now - 1 us), stored as the clock
local function clock_cut(W, floor)
  local ms, n, stored = clock_floor(W, floor)
  local pms, pus = clock_now()
  local pn = pus * 1024 - 1
  if pn < 0 then pms, pn = pms - 1, 1048575 end
  if id_later(pms, pn, ms, n) then ms, n = pms, pn end
  local cut = id_text(ms, n)
  if cut ~= stored then redis.call('HSET', W, 'clock', cut) end
  return cut
end
-- the ids a write issues: ARGV[#ARGV - 1] the shard, ARGV[#ARGV] the caller's floor; the work
-- hash (where the clock lives) is KEYS[#KEYS - 5] (a write with relay entries touches rows)
local hlc = nil
local function hlc_issue()
  if not hlc then
    local W = KEYS[#KEYS - 5]
    local ms, n = clock_floor(W, ARGV[#ARGV])
    local pms, pus = clock_now()
    hlc = {W = W, s = tonumber(ARGV[#ARGV - 1]), ms = ms, n = n, pms = pms, pus = pus}
  end
  local pn = hlc.pus * 1024 + hlc.s
  if id_later(hlc.pms, pn, hlc.ms, hlc.n) then
    hlc.ms, hlc.n = hlc.pms, pn
  else
    hlc.ms, hlc.n = id_next(hlc.ms, hlc.n, hlc.s)
  end
  local id = id_text(hlc.ms, hlc.n)
  redis.call('HSET', hlc.W, 'clock', id)
  hlc.last = id
  return id
end
-- the last id this write issued ('' when none)
local function hlc_last()
  if hlc then return hlc.last end
  return ''
end
"""
"""The shard clock's Lua (see the module docstring)."""

_HLC_RELAY = """-- XADD with the next id of the shard clock (a seq that names the shard)
local function relay(ids, key, ...)
  local entry_id = hlc_issue()
  redis.call('XADD', key, entry_id, ...)
  ids[#ids + 1] = entry_id
  return entry_id
end
"""

_STAR_RELAY_START = "-- XADD with an automatic id;"
_RELAY_END = "-- append the emitted event at"


def _sharded_relay_writes() -> str:
    """:data:`~harel_store_redis._scripts._RELAY_WRITES` with ``relay`` issuing ids from the
    shard clock instead of ``XADD *``."""
    start = _RELAY_WRITES.index(_STAR_RELAY_START)
    end = _RELAY_WRITES.index(_RELAY_END)
    return _RELAY_WRITES[:start] + _HLC + _HLC_RELAY + _RELAY_WRITES[end:]


def _sharded(script: LuaScript, replies: dict[str, str]) -> LuaScript:
    """The sharded twin of a relay-writing script: the shard clock's ``relay`` and the replies
    that name the last id issued (``replies``: old text -> new text, each found)."""
    source = script.source
    assert source.count(_RELAY_WRITES) == 1, script.name
    source = source.replace(_RELAY_WRITES, _sharded_relay_writes())
    for old, new in replies.items():
        assert old in source, (script.name, old)
        source = source.replace(old, new)
    return LuaScript(f"{script.name}_sharded", source)


COMMIT_SHARDED = _sharded(
    COMMIT,
    {
        "apply_touches(work_at, a, n_touches)\nreturn {1}\n": (
            "apply_touches(work_at, a, n_touches)\nreturn {1, hlc_last()}\n"
        )
    },
)
"""The full commit in one shard; ``ARGV`` ends with the shard number and the caller's floor,
and an applied commit replies ``{1, the last id it issued or ''}``."""

ENQUEUE_SHARDED = _sharded(ENQUEUE, {})
"""The enqueue in the target's shard (``ARGV`` ends with the shard number and the floor)."""

IMPORT_SHARDED = _sharded(
    IMPORT,
    {
        "if not with_exe then return {1} end": "if not with_exe then return {1, hlc_last()} end",
        "for i = 0, n_steps - 1 do redis.call('RPUSH', KEYS[2], ARGV[steps_at + i]) end\n"
        "return {1}\n": (
            "for i = 0, n_steps - 1 do redis.call('RPUSH', KEYS[2], ARGV[steps_at + i]) end\n"
            "return {1, hlc_last()}\n"
        ),
    },
)
"""The import in the execution's shard (``ARGV`` ends with the shard number and the floor)."""

PENDING_SHARDED = LuaScript(
    "pending_sharded",
    _HLC
    + """
-- KEYS: 1 stream, 2 the shard's work hash (its clock); ARGV: 1 count ('' = all), 2 floor
-- reply: {cut, entries}: every entry this shard appends later has a seq above the cut
local cut = clock_cut(KEYS[2], ARGV[2])
if ARGV[1] == '' then return {cut, redis.call('XRANGE', KEYS[1], '-', '+')} end
return {cut, redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', ARGV[1])}
""",
)
"""One shard's part of a relay sweep: its cut, then its first entries."""

CLAIM_SCAN = LuaScript(
    "claim_scan",
    _TYPE_GUARD
    + _WORK
    + _HLC
    + """
-- KEYS: 1 work, 2..6 ready zsets of priorities 0..4, 7 owned, 8 timer-at, 9 timers
-- ARGV: 1 now (repr), 2 limit, 3 floor
-- reply: {1, cut, {member, priority, ready_at, units, holder}, ...}: the shard's ready rows
-- (at most limit per tier) with their units here and the holder of an expired lease ('' for
-- a free row); nothing is repaired here (a row without units here may stand for a group with
-- units in other shards: the caller judges, and repairs with CLAIM_TAKE's mode z)
local bad = wrong_type({'hash', 'zset', 'zset', 'zset', 'zset', 'zset', 'zset', 'hash', 'zset'})
if bad then return {3, bad} end
local W = KEYS[1]
local R = {KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]}
local now, limit = ARGV[1], tonumber(ARGV[2])
local t_now = tonumber(now)
local out = {1, clock_cut(W, ARGV[3])}
for p = 0, 4 do
  local found = redis.call('ZRANGEBYSCORE', R[p + 1], '-inf', now, 'WITHSCORES', 'LIMIT', 0,
                           limit)
  for i = 1, #found, 2 do
    local m = found[i]
    local spawns = redis.call('ZLEXCOUNT', KEYS[7], '[' .. m .. 's', '(' .. m .. 't')
    local outbox = redis.call('ZLEXCOUNT', KEYS[7], '[' .. m .. 'o', '(' .. m .. 'p')
    local _, _, due = group_timers(KEYS[7], KEYS[8], KEYS[9], m, t_now)
    local units = spawns + outbox + #due
    local row = work_row(W, m)
    out[#out + 1] = {m, p, found[i + 1], units, row and row.holder or ''}
  end
end
return out
""",
)
"""A claim's first step on one shard: the cut, and the ready rows with their unit counts."""

CLAIM_TAKE = LuaScript(
    "claim_take",
    _TYPE_GUARD
    + _WORK
    + """
-- KEYS: 1 work, 2..6 ready zsets of priorities 0..4, 7 owned, 8 timer-at, 9 timers,
--       10 outbox, 11 spawns
-- ARGV: 1 now (repr), 2 the lease's expiry (repr), 3 owner, 4 the cut (an id), then 4 per
--       group: mode, member, x, y where mode is
--   h (the group's home shard): x the priority of a new row, y the unit budget: lease the
--     group unless its row holds an unexpired lease; reply {member, 1, priority, the row
--     before or false, due timers {path, fire_at, ...}, outbox entries, spawn intents} or
--     {member, 0, the row as stored}
--   p (the group's home shard): peek, reply {member, 4, the row as stored or false}
--   r (another shard, the group leased at home): x the group's priority, y the budget: mark
--     the row leased (if there is one) and reply {member, 2, outbox entries up to the cut}
--   x (another shard, the group held at home by someone else): x the holder, y its expiry:
--     mark a free or expired row as held by it (nothing to reply)
--   f (another shard, a release): x retry_at (repr) or '', y the ready_at of relay work
--     written now: a row that is free, expired or held by owner is re-dated to y, not before
--     x, when relay entries are left here, else dropped; reply {member, 5, 1 if entries are
--     left here or 0}
--   z (repair, a row a scan found without units): unless it holds an unexpired lease, re-date
--     it to the group's earliest timer here, else drop it when no relay entry is left here
--     (nothing to reply)
local bad = wrong_type({'hash', 'zset', 'zset', 'zset', 'zset', 'zset', 'zset', 'hash', 'zset',
                        'stream', 'stream'})
if bad then return {3, bad} end
local W = KEYS[1]
local R = {KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]}
local now, expiry, owner = ARGV[1], ARGV[2], ARGV[3]
local t_now = tonumber(now)
local cut_ms, cut_n = string.match(ARGV[4], '^(%d+)-(%d+)$')
cut_ms, cut_n = tonumber(cut_ms), tonumber(cut_n)
local cut = {cut_ms, cut_n}
"""
    + RELAY_UNITS
    + """local out = {1}
for g = 0, (#ARGV - 4) / 4 - 1 do
  local b = 5 + 4 * g
  local mode, m = ARGV[b], ARGV[b + 1]
  local row = work_row(W, m)
  if row and not row.p then  -- unreadable: rebuilt by this step
    for i = 1, #R do redis.call('ZREM', R[i], m) end
    row = nil
  end
  if mode == 'p' then
    out[#out + 1] = {m, 4, row and row.raw or false}
  elseif mode == 'h' then
    if row and row.holder ~= '' and tonumber(row.at) > t_now then
      out[#out + 1] = {m, 0, row.raw}
    else
      local budget = tonumber(ARGV[b + 3])
      local p = row and row.p or ARGV[b + 2]
      work_put(W, R, m, row and row.p or nil, p, expiry, owner)
      local spawns = relay_units(KEYS[11], m, 's', 't', budget)
      local outbox = relay_units(KEYS[10], m, 'o', 'p', budget, cut)
      local _, _, due = group_timers(KEYS[7], KEYS[8], KEYS[9], m, t_now)
      table.sort(due, function(x, y)
        if x[3] ~= y[3] then return x[3] < y[3] end
        return x[4] < y[4]
      end)
      local timers = {}
      for i = 1, math.min(#due, budget) do
        timers[#timers + 1] = due[i][1]
        timers[#timers + 1] = due[i][2]
      end
      out[#out + 1] = {m, 1, p, row and row.raw or false, timers, outbox, spawns}
    end
  elseif mode == 'r' then
    if row then work_put(W, R, m, row.p, ARGV[b + 2], expiry, owner) end
    out[#out + 1] = {m, 2, relay_units(KEYS[10], m, 'o', 'p', tonumber(ARGV[b + 3]), cut)}
  elseif mode == 'f' then
    local relay = redis.call('ZRANGEBYLEX', KEYS[7], '[' .. m .. 'o', '(' .. m .. 't',
                             'LIMIT', 0, 1)
    local kept = #relay > 0 and 1 or 0
    if row and (row.holder == '' or row.holder == owner or tonumber(row.at) <= t_now) then
      if #relay > 0 then
        local ready = ARGV[b + 3]
        if ARGV[b + 2] ~= '' and tonumber(ARGV[b + 2]) > tonumber(ready) then
          ready = ARGV[b + 2]
        end
        work_put(W, R, m, row.p, row.p, ready, '')
      else
        work_drop(W, R, m, row.p)
      end
    end
    out[#out + 1] = {m, 5, kept}
  elseif mode == 'z' then
    if row and (row.holder == '' or tonumber(row.at) <= t_now) then
      local first = group_timers(KEYS[7], KEYS[8], KEYS[9], m, t_now)
      local relay = redis.call('ZRANGEBYLEX', KEYS[7], '[' .. m .. 'o', '(' .. m .. 't',
                               'LIMIT', 0, 1)
      if first then work_put(W, R, m, row.p, row.p, first, '')
      elseif #relay == 0 then work_drop(W, R, m, row.p) end
    end
  elseif row and (row.holder == '' or tonumber(row.at) <= t_now) then
    work_put(W, R, m, row.p, row.p, ARGV[b + 3], ARGV[b + 2])
  end
end
return out
""",
)
"""A claim's lease step on one shard (see the ``ARGV`` comment): the home leases, the other
shards' entries of the leased groups, and the hiding of rows whose group someone else holds."""

LAYOUT_SHARDED = LuaScript(
    "layout_sharded",
    """
-- KEYS: 1 the layout hash; ARGV: 1 the version, 2 the release, 3 the shard count, 4 create
-- (1: write the sharded layout when there is none)
-- reply: {version or false, its writer or false, its shard count or false, 1 if created}
local cur = redis.call('HMGET', KEYS[1], 'v', 'by', 'shards')
if cur[1] then return {cur[1], cur[2], cur[3], 0} end
if ARGV[4] ~= '1' then return {false, false, false, 0} end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'by', ARGV[2], 'shards', ARGV[3])
return {ARGV[1], ARGV[2], ARGV[3], 1}
""",
)
"""Read (and in a new namespace create) the sharded layout's record: one key, so it runs in
any slot, and atomic, so two processes creating one at once agree on its shard count."""


MIGRATE_RELAY = LuaScript(
    "migrate_relay",
    _WORK
    + _HLC
    + """
-- The upgrade from the single-slot layout (4) to the sharded one (5): move ONE relay entry,
-- atomically, from the single-slot keys to its group's home shard (a single server: no slot
-- rule; a cluster never holds both).
-- KEYS: 1 the old stream, 2 the old owned, 3 the old work hash, 4 the shard's stream, 5 its
--       owned, 6 its work hash, 7..11 its ready zsets of priorities 0..4
-- ARGV: 1 the old entry id, 2 the owned tag (o: outbox, s: spawns), 3 the untargeted owner
--       prefix, 4 the ready_at of relay work written now (repr), 5 the shard, 6 the floor
-- reply: {1, the new entry id, or '' when the entry is already gone (moved by another opener)}
local found = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #found == 0 then return {1, ''} end
local fields = found[1][2]
local member = ARGV[3]
for i = 1, #fields, 2 do
  if fields[i] == 'o' then member = fields[i + 1] end
end
local old = work_row(KEYS[3], member)
local p = (old and old.p) or '0'
local id = hlc_issue()
redis.call('XADD', KEYS[4], id, unpack(fields))
redis.call('ZADD', KEYS[5], 0, member .. ARGV[2] .. id)
work_touch(KEYS[6], {KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]}, member, ARGV[4], p, false)
redis.call('ZREM', KEYS[2], member .. ARGV[2] .. ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
return {1, id}
""",
)
"""One relay entry of an upgrade moved to its shard with a new seq (the upgrade moves them in
the old stream's order, so the new seqs keep it), its index and its group's row touched (the
old row's priority), in one atomic call."""

LAYOUT_MIGRATE = LuaScript(
    "layout_migrate",
    """
-- KEYS: 1 the layout hash; ARGV: 1 mark|done, 2 the shard count, 3 the release
-- mark: a layout 4 record without a shard count gets one (an upgrade to the sharded layout in
--   progress); done: a layout 4 record with that shard count becomes layout 5
-- reply: {version, shard count or false}
local cur = redis.call('HMGET', KEYS[1], 'v', 'shards')
if ARGV[1] == 'mark' then
  if cur[1] == '4' and not cur[2] then
    redis.call('HSET', KEYS[1], 'shards', ARGV[2])
    return {'4', ARGV[2]}
  end
  return {cur[1] or false, cur[2] or false}
end
if cur[1] == '4' and cur[2] == ARGV[2] then
  redis.call('HSET', KEYS[1], 'v', '5', 'by', ARGV[3])
  return {'5', ARGV[2]}
end
return {cur[1] or false, cur[2] or false}
""",
)
"""The layout record's two steps of an upgrade to the sharded layout (atomic, idempotent)."""

SUMMARY_IDS = LuaScript(
    "summary_ids",
    """
-- KEYS: 1 the summaries hash; ARGV: 1 count -- reply: up to about count ids it holds
local found = redis.call('HSCAN', KEYS[1], 0, 'COUNT', ARGV[1])[2]
local ids = {}
for i = 1, #found, 2 do ids[#ids + 1] = found[i] end
return ids
""",
)
"""Some ids of the summaries hash (the upgrade's list of what is left to move)."""

SHARDED_SCRIPTS: tuple[LuaScript, ...] = (
    COMMIT_SHARDED,
    ENQUEUE_SHARDED,
    IMPORT_SHARDED,
    PENDING_SHARDED,
    CLAIM_SCAN,
    CLAIM_TAKE,
    LAYOUT_SHARDED,
    MIGRATE_RELAY,
    LAYOUT_MIGRATE,
    SUMMARY_IDS,
)
"""The scripts only the sharded layout runs (loaded at open with the others)."""
