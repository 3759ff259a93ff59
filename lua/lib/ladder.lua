-- lib/ladder: an active offer stands in one of three sets on one slot: the ladder the requests walk,
-- the full set while it is at its in-flight cap (lib/keys K_FULL), or the dry set while its
-- remaining capacity (capacity - burned - held) is below the market's minimum (K_DRY; before the
-- full set: an offer both dry and at its cap is dry), so that a request never reads the offers
-- ahead of the first with room that cannot take it, however many there are. Same scores in all.
-- Held apart, the offer's side is reserved on its own slot and only the ladder exists.

-- Capacity tiers (K_TIERS, nested): tier t holds the ladder's offers with at least TIER_FLOORS[t]
-- not yet burned (capacity - burned), and a request holding at least that walks it (lib/pick), so
-- the offers too small for it below that floor (many posted at the minimum) cost it no read: each
-- offer it reads has at least a quarter of its hold unburned. Held is left out, so an offer's tiers
-- move only when a burn or a capacity edit crosses a floor or it leaves or joins the ladder, never
-- on a hold; one with much held stands where it cannot serve, a skipped read.
-- During a rolling deploy an earlier build puts offers on the ladder (posted, reinstated, freed,
-- no longer dry) in no tier, and moves them off it or edits them leaving their tiers as they were:
-- so the tiers are walked only while `tiered` is on the market hash, set by a sweep (sweep_tiers)
-- begun after the last replica of such a build was seen and after this replica's start.
local TIER_FLOORS = { 40000, 160000, 640000 }
-- The top floor: a burn that leaves at least this crosses none (lua/clear.lua, lib/attempts).
local TIER_TOP = 640000
-- How many tiers an offer with `unburned` stands in; for a hold, the tier its request walks.
local function tier_count(unburned)
  local n = 0
  while n < 3 and unburned >= TIER_FLOORS[n + 1] do n = n + 1 end
  return n
end
-- Out of tiers `from` to 3.
local function untier(id, from)
  for t = from, 3 do rcall('ZREM', K_TIERS[t], id) end
end
-- Into the tiers `unburned` reaches, out of the others.
local function retier(score, id, unburned)
  local n = tier_count(unburned)
  for t = 1, n do rcall('ZADD', K_TIERS[t], score, id) end
  untier(id, n + 1)
end
-- A burn taking `unburned` below a floor takes the offer out of the tiers above what is left;
-- called only when what is left is below TIER_TOP.
local function burn_tiers(id, unburned, burn)
  local n = tier_count(unburned - burn)
  if n < tier_count(unburned) then untier(id, n + 1) end
end

-- Moves an offer from one set to the other, its score kept; nothing when it is not in `from`.
-- unburned (capacity - burned): given when the ladder is one of them, for its tiers (nil: the
-- caller moves its tiers).
local function shift(from, to, id, unburned)
  local score = rcall('ZSCORE', from, id)
  if score and unburned == nil then
    rcall('ZREM', from, id)
    rcall('ZADD', to, score, id)
  elseif score then
    rcall('ZREM', from, id)
    rcall('ZADD', to, score, id)
    if to == K_LADDER then
      for t = 1, tier_count(unburned) do rcall('ZADD', K_TIERS[t], score, id) end
    elseif from == K_LADDER then
      for t = 1, tier_count(unburned) do rcall('ZREM', K_TIERS[t], id) end
    end
  end
end

-- An offer leaving the ladder (paused, deleted, suspended) leaves the other sets too.
local function unlist(id)
  rcall('ZREM', K_LADDER, id)
  rcall('ZREM', K_FULL, id)
  rcall('ZREM', K_DRY, id)
  untier(id, 1)
end

-- An offer joining the ladder held apart (lua/index-offer.lua): out of the full set, where the
-- next request that finds it at its cap puts it back.
local function enlist(score, id)
  rcall('ZADD', K_LADDER, score, id)
  rcall('ZREM', K_FULL, id)
end

-- The least remaining capacity an offer stands on the ladder with, micro-DIEM
-- (SVC_MIN_ROUTABLE_MICRO_DIEM, on the market hash; absent: 0), never above DRY_CAP: an offer with
-- at least DRY_CAP left is not dry, known without reading the minimum, so a roomy offer's admit and
-- clear read nothing more.
local DRY_CAP = 1000000
local function dry_floor()
  local floor = stored(rcall('HGET', K_MARKET, 'minRoutable'))
  if floor > DRY_CAP then return DRY_CAP end
  return floor
end

-- Whether `left` (micro-DIEM: capacity - burned - held) makes an offer dry; floor: the minimum when
-- the caller read it already (nil: read here, only when it can matter).
local function is_dry(left, floor)
  if left >= DRY_CAP then return false end
  return left < (floor or dry_floor())
end

-- The dry set read a page at a time (lua/reap.lua), on from the score the last page ended at
-- (`drySwept` on the market hash; absent: from the start), so that each member is read in turn
-- however many stay dry before it: one dry only by a minimum since lowered (a replica started with
-- a lower setting) stands where its row says, the ladder or the full set at its cap. At most
-- `limit` offers a call.
local function sweep_dry(limit)
  -- Due only once the minimum was lowered (src/market/min-routable.ts sets the cursor to -inf):
  -- otherwise an offer leaves the dry set by what raises its own remaining, and nothing is read.
  local after = rcall('HGET', K_MARKET, 'drySwept')
  if not after then return end
  local from = after == '-inf' and after or ('(' .. after)
  local page = rcall('ZRANGEBYSCORE', K_DRY, from, '+inf', 'WITHSCORES', 'LIMIT', '0', s(limit))
  if #page > 0 then
    local floor = dry_floor()
    for i = 1, #page, 2 do
      local o = rcall('HMGET', k_offer(page[i]), 'capacity', 'burned', 'held', 'inflight', 'maxInFlight')
      if o[1] and not is_dry(stored(o[1]) - stored(o[2]) - stored(o[3]), floor) then
        shift(K_DRY, stored(o[4]) >= stored(o[5]) and K_FULL or K_LADDER, page[i], stored(o[1]) - stored(o[2]))
      end
    end
  end
  -- A short page reached the end: the next starts over.
  if #page < 2 * limit then
    rcall('HDEL', K_MARKET, 'drySwept')
  else
    rcall('HSET', K_MARKET, 'drySwept', page[#page])
  end
end

-- The ladder and the first tier read a page at a time (lua/reap.lua), on from the score the last
-- page ended at (`tierSwept` on the market hash; absent: nothing to do), so that each offer an
-- earlier build put on the ladder, moved or edited stands in the tiers its row says, at its ladder
-- score, and each tier member no longer on the ladder leaves them; read through, the tiers are
-- walked again (`tiered`). Armed at each start of a replica of this build (src/market/tiers.ts),
-- and held at the ladder's start, the tiers not walked, on every call while a replica of a build
-- that keeps no tiers is seen (`tierless`): the sweep that sets `tiered` begins after its last
-- write. At most `limit` offers of each a call.
local function sweep_tiers(limit, tierless)
  if tierless then
    rcall('HDEL', K_MARKET, 'tiered')
    rcall('HSET', K_MARKET, 'tierSwept', '-inf')
    return
  end
  local after = rcall('HGET', K_MARKET, 'tierSwept')
  if not after then return end
  local from = after == '-inf' and after or ('(' .. after)
  local page = rcall('ZRANGEBYSCORE', K_LADDER, from, '+inf', 'WITHSCORES', 'LIMIT', '0', s(limit))
  -- A short page reached the ladder's end: the tier is read to its end too.
  local upto = #page < 2 * limit and '+inf' or page[#page]
  local stale = rcall('ZRANGEBYSCORE', K_TIERS[1], from, upto, 'LIMIT', '0', s(limit))
  -- A full page of the tier ends this call's range where it ends.
  if #stale == limit then upto = rcall('ZSCORE', K_TIERS[1], stale[#stale]) end
  for i = 1, #page, 2 do
    local o = rcall('HMGET', k_offer(page[i]), 'capacity', 'burned')
    if o[1] then retier(page[i + 1], page[i], stored(o[1]) - stored(o[2])) end
  end
  -- Nested, so each stale member is in the first tier.
  for _, id in ipairs(stale) do
    if not rcall('ZSCORE', K_LADDER, id) then untier(id, 1) end
  end
  if upto == '+inf' then
    rcall('HDEL', K_MARKET, 'tierSwept')
    rcall('HSET', K_MARKET, 'tiered', '1')
  else
    rcall('HSET', K_MARKET, 'tierSwept', upto)
  end
end

-- An active offer on one slot (posted, changed, reinstated) stood by its own row: dry, full (at
-- its cap) or on the ladder; out of the other two.
local function stand(score, id)
  local o = rcall('HMGET', k_offer(id), 'capacity', 'burned', 'held', 'inflight', 'maxInFlight')
  local to = K_LADDER
  if is_dry(stored(o[1]) - stored(o[2]) - stored(o[3])) then
    to = K_DRY
  elseif stored(o[4]) >= stored(o[5]) then
    to = K_FULL
  end
  for _, set in ipairs({ K_LADDER, K_FULL, K_DRY }) do
    if set ~= to then rcall('ZREM', set, id) end
  end
  rcall('ZADD', to, score, id)
  retier(score, id, to == K_LADDER and stored(o[1]) - stored(o[2]) or 0)
end

-- Held apart, each replica's view reads the ladder and its offers again only when this count on the
-- market's hash moves (src/market/ladder-view.ts): whatever changes the ladder or an offer's
-- standing moves it.
local function ladder_moved()
  rcall('HINCRBY', K_MARKET, 'ladderVersion', 1)
end

-- The offers of both sets scored from `min` to `max`, in score order (the capacity snapshot's read).
local function ladder_range(min, max)
  local a = rcall('ZRANGEBYSCORE', K_LADDER, min, max, 'WITHSCORES')
  local b = rcall('ZRANGEBYSCORE', K_FULL, min, max, 'WITHSCORES')
  if #b == 0 then
    local ids = {}
    for i = 1, #a, 2 do ids[#ids + 1] = a[i] end
    return ids
  end
  local ids, i, j = {}, 1, 1
  while i <= #a or j <= #b do
    if j > #b or (i <= #a and int(a[i + 1]) <= int(b[j + 1])) then
      ids[#ids + 1], i = a[i], i + 2
    else
      ids[#ids + 1], j = b[j], j + 2
    end
  end
  return ids
end
