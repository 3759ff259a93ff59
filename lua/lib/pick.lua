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
-- An offer found dry (lib/ladder: put on the ladder or in the full set by a build that does not
-- know the dry set, or by a minimum raised since) counts at the price with nothing routable and moves
-- to the dry set once read. The dry set itself is never walked: what stands there is no request's,
-- and a refusal with nothing else at the price says so (-6, nothing routable) from its first entry.
-- A request holding at least a capacity tier's floor walks that tier first (lib/ladder): every
-- offer it reads has at least a quarter of the hold unburned. Its offers are on the ladder, so the
-- first with room is the cheapest that can carry the request; the one picked is checked to stand on
-- the ladder, so an offer left in a tier where it no longer belongs (by a build that does not know
-- the tiers) costs a skipped read and leaves the tiers once read. A tier with nothing for the request
-- proves nothing (an offer may be missing from it): the ladder and the full set are then walked as
-- ever, from their start, so a refusal and its counts never rest on a tier. The tiers are walked only
-- while the market hash says they hold every offer they should (`tiered`, lib/ladder sweep_tiers):
-- not while a build that keeps no tiers may have put one on the ladder in none; read only by a
-- request whose hold reaches a tier.
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
  -- The ladder's offers found at their cap, and the offers found dry with their set: moved once
  -- both sets were read, so none counts twice.
  local capped, dried = nil, nil
  -- Offers read in a tier that do not belong there, with the first tier each leaves.
  local stale = nil
  local floor = nil
  local ceiling = ladder_ceiling_s(max_cents)
  -- Leaving the ladder, an offer leaves its tiers too (read on the ladder or in a tier).
  local function settle()
    if capped then
      for _, full in ipairs(capped) do
        shift(K_LADDER, K_FULL, full)
        untier(full, 1)
      end
    end
    if dried then
      for i = 1, #dried, 2 do
        shift(dried[i], K_DRY, dried[i + 1])
        if dried[i] == K_LADDER then untier(dried[i + 1], 1) end
      end
    end
    if stale then for i = 1, #stale, 2 do untier(stale[i], stale[i + 1]) end end
  end
  -- Pass 0 walks the tier the hold reaches (none below the lowest floor), 1 the ladder, 2 the full set.
  local tier = 0
  if hold_diem >= TIER_FLOORS[1] and rcall('HGET', K_MARKET, 'tiered') then tier = tier_count(hold_diem) end
  local set = tier > 0 and K_TIERS[tier] or K_LADDER
  for pass = tier > 0 and 0 or 1, 2 do
    if pass == 1 and tier > 0 then
      set = K_LADDER
      at_price, eligible_routable, max_eligible, big_enough, untried = 0, 0, 0, 0, 0
    end
    -- Nothing moves between the sets until the walk ends (capped, below), so the offset holds.
    local page = rcall('ZRANGEBYSCORE', set, '-inf', ceiling, 'LIMIT', '0', FIRST_PAGE_S)
    local rest = #page == FIRST_PAGE
    while page do
      for i = 1, #page do
        local id = page[i]
        local o = read_offer(id, now)
        local dry = false
        if o then
          local left = o.capacity - o.burned - o.held
          if left < DRY_CAP then
            floor = floor or dry_floor()
            dry = left < floor
          end
          if dry then
            local from = pass == 0 and K_LADDER or set
            if dried then dried[#dried + 1], dried[#dried + 2] = from, id else dried = { from, id } end
          elseif pass == 0 and o.inflight < o.max_in_flight then
            -- Read in a tier while not active or burned below its floor: out of the tiers it left
            -- (dry or at its cap, it leaves them with the ladder, in settle).
            local keep = o.status == 'active' and tier_count(o.capacity - o.burned) or 0
            if keep < tier then
              if stale then stale[#stale + 1], stale[#stale + 2] = id, keep + 1 else stale = { id, keep + 1 } end
            end
          end
        elseif pass == 0 then
          if stale then stale[#stale + 1], stale[#stale + 2] = id, 1 else stale = { id, 1 } end
        end
        if dry then
          if is_live(o, now) then at_price = at_price + 1 end
        elseif o and is_live(o, now) then
          at_price = at_price + 1
          local r = routable(o)
          eligible_routable = eligible_routable + r
          if r > max_eligible then max_eligible = r end
          if r >= hold_diem then
            big_enough = big_enough + 1
            if not tried[id] then
              untried = untried + 1
              if o.inflight < o.max_in_flight then
                if set == K_FULL then shift(K_FULL, K_LADDER, id, o.capacity - o.burned) end
                -- From a tier: only while it stands on the ladder.
                if pass > 0 or rcall('ZSCORE', K_LADDER, id) then
                  settle()
                  return o, nil
                end
                if stale then stale[#stale + 1], stale[#stale + 2] = id, 1 else stale = { id, 1 } end
              end
            end
          end
        elseif o and o.status == 'active' and not tried[id] and routable(o) >= hold_diem then
          -- cooling down: it will be back shortly, so this is "busy", not "no supply"
          at_price = at_price + 1
          big_enough = big_enough + 1
          untried = untried + 1
        end
        if pass < 2 and o and not dry and o.inflight >= o.max_in_flight then
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
  settle()

  if at_price == 0 then
    -- Only dry offers at the buyer's price: they lack capacity, none has any to route.
    if #rcall('ZRANGEBYSCORE', K_DRY, '-inf', ceiling, 'LIMIT', '0', '1') > 0 then return nil, { -6, '0', '0' } end
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
    if cheapest == nil then
      -- Only dry offers, all above the max: the cheapest of them, with nothing routable.
      local first = rcall('ZRANGE', K_DRY, '0', '0', 'WITHSCORES')
      if #first == 0 then return nil, { -4 } end
      return nil, { -5, max_cents, math.floor(int(first[2]) / LADDER_STEP), '0' }
    end
    return nil, { -5, max_cents, cheapest, s(above) }
  end
  if big_enough == 0 then return nil, { -6, s(eligible_routable), s(max_eligible) } end
  if untried == 0 then return nil, { -8 } end
  return nil, { -7 }
end
