-- lib/ladder: an active offer stands in one of three sets on one slot: the ladder the requests walk,
-- the full set while it is at its in-flight cap (lib/keys K_FULL), or the dry set while its
-- remaining capacity (capacity - burned - held) is below the market's minimum (K_DRY; before the
-- full set: an offer both dry and at its cap is dry), so that a request never reads the offers
-- ahead of the first with room that cannot take it, however many there are. Same scores in all.
-- Held apart, the offer's side is reserved on its own slot and only the ladder exists.

-- Moves an offer from one set to the other, its score kept; nothing when it is not in `from`.
local function shift(from, to, id)
  local score = rcall('ZSCORE', from, id)
  if score then
    rcall('ZREM', from, id)
    rcall('ZADD', to, score, id)
  end
end

-- An offer leaving the ladder (paused, deleted, suspended) leaves the other sets too.
local function unlist(id)
  rcall('ZREM', K_LADDER, id)
  rcall('ZREM', K_FULL, id)
  rcall('ZREM', K_DRY, id)
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
        shift(K_DRY, stored(o[4]) >= stored(o[5]) and K_FULL or K_LADDER, page[i])
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
