-- lib/ladder: an active offer stands in one of two sets on one slot: the ladder the requests walk,
-- or the full set while it is at its in-flight cap (lib/keys K_FULL), so that a request never reads
-- the full offers ahead of the first with room. Same scores in both. Held apart, the offer's side
-- is reserved on its own slot and only the ladder exists.

-- Moves an offer from one set to the other, its score kept; nothing when it is not in `from`.
local function shift(from, to, id)
  local score = rcall('ZSCORE', from, id)
  if score then
    rcall('ZREM', from, id)
    rcall('ZADD', to, score, id)
  end
end

-- An offer leaving the ladder (paused, deleted, suspended) leaves the full set too.
local function unlist(id)
  rcall('ZREM', K_LADDER, id)
  rcall('ZREM', K_FULL, id)
end

-- An offer joining the ladder (posted, repriced, reinstated): out of the full set, where the next
-- request that finds it at its cap puts it back.
local function enlist(score, id)
  rcall('ZADD', K_LADDER, score, id)
  rcall('ZREM', K_FULL, id)
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
