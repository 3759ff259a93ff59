-- lib/pick: the router's choice, shared by admit (which then holds) and the video quote (which
-- only looks): the cheapest live offer at or below the buyer's max whose routable capacity covers
-- the hold (micro-DIEM), not tried yet, below its in-flight cap. Without one, the refusal admit returns.
-- The ladder holds the offers with room (lib/ladder): an offer found there at its cap (put back by
-- a build that does not know the full set) moves to the full set once read. Only when the ladder
-- has nothing for the request is the full set read too, for the refusal's counts, which cover both
-- sets as one; an offer there with room (a slot freed by such a build) moves back and is picked.
-- In the full set, once one offer that could carry the request and was not tried is found busy,
-- the refusal can only be "busy" (-7, no counts) unless a later one has room, which only such a
-- build leaves: the walk stops there, so a buyer asking again while every offer is at its cap
-- pays for one offer read, not all of them. An offer freed behind it waits for the reaper's pass
-- (reap.lua).
-- A request that tried nothing yet (most): one table for all, never written.
local NONE_TRIED = {}
-- Each set's first few offers are read first: the first offer with room (on the ladder) or proven
-- busy (in the full set) is nearly always among them, so a request's cost does not grow with the
-- offers behind it. A walk that must go on reads the rest of the set at once: a refusal costs at
-- most one call more per set than a single read of each.
local FIRST_PAGE, FIRST_PAGE_S = 4, '4'
local function pick_offer(max_cents, hold_diem, tried, now)
  local at_price = 0          -- live offers at or below max
  local eligible_routable = 0 -- their routable capacity
  local max_eligible = 0      -- the largest of them
  local big_enough = 0        -- those that could carry this request
  local untried = 0           -- ... and were not tried yet
  -- The ladder's offers found at their cap: moved once both sets were read, so none counts twice.
  local capped = nil
  local set = K_LADDER
  local ceiling = ladder_ceiling_s(max_cents)
  for pass = 1, 2 do
    -- Nothing moves between the sets until the walk ends (capped, below), so the offset holds.
    local page = rcall('ZRANGEBYSCORE', set, '-inf', ceiling, 'LIMIT', '0', FIRST_PAGE_S)
    local rest = #page == FIRST_PAGE
    while page do
      for i = 1, #page do
        local id = page[i]
        local o = read_offer(id, now)
        if o and is_live(o, now) then
          at_price = at_price + 1
          local r = routable(o)
          eligible_routable = eligible_routable + r
          if r > max_eligible then max_eligible = r end
          if r >= hold_diem then
            big_enough = big_enough + 1
            if not tried[id] then
              untried = untried + 1
              if o.inflight < o.max_in_flight then
                if set == K_FULL then shift(K_FULL, K_LADDER, id) end
                if capped then for _, full in ipairs(capped) do shift(K_LADDER, K_FULL, full) end end
                return o, nil
              end
            end
          end
        elseif o and o.status == 'active' and not tried[id] and routable(o) >= hold_diem then
          -- cooling down: it will be back shortly, so this is "busy", not "no supply"
          at_price = at_price + 1
          big_enough = big_enough + 1
          untried = untried + 1
        end
        if pass == 1 and o and o.inflight >= o.max_in_flight then
          if capped then capped[#capped + 1] = id else capped = { id } end
        end
        if pass == 2 and untried > 0 then
          rest = false
          break
        end
      end
      -- A negative count: everything after the first page.
      page = rest and rcall('ZRANGEBYSCORE', set, '-inf', ceiling, 'LIMIT', FIRST_PAGE_S, '-1') or nil
      rest = false
    end
    set = K_FULL
  end
  if capped then for _, full in ipairs(capped) do shift(K_LADDER, K_FULL, full) end end

  if at_price == 0 then
    -- Nothing at the buyer's price: is there anything at all, in either set?
    local cheapest = nil
    local above = 0
    for _, id in ipairs(ladder_range('(' .. ladder_ceiling(max_cents), '+inf')) do
      local o = read_offer(id, now)
      if o and is_live(o, now) then
        if cheapest == nil then cheapest = o.ask end
        above = above + routable(o)
      end
    end
    if cheapest == nil then return nil, { -4 } end
    return nil, { -5, max_cents, cheapest, s(above) }
  end
  if big_enough == 0 then return nil, { -6, s(eligible_routable), s(max_eligible) } end
  if untried == 0 then return nil, { -8 } end
  return nil, { -7 }
end
