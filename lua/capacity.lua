--[[
  capacity: the ladder as the router sees it, by the same rule admit uses (lib/offers), for the
  capacity snapshot: the offers at their in-flight cap (the full set, lib/ladder) count as they
  stand, busy but not gone; the dry set's (less left than the market's minimum) route nothing and
  are not listed, nor is an offer found dry elsewhere. Read-only.
  Includes lib/keys, lib/numbers, lib/ladder, lib/offers.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  maxPriceCents: max price, cents (80 for the whole corridor)

  Returns a flat list: askCents, routable micro-DIEM, askCents, routable, ... cheapest first, for
  live offers at or below the max with routable capacity above zero.
]]
local now = now_ms()
local out = {}
local floor = dry_floor()
for _, id in ipairs(ladder_range('-inf', ladder_ceiling(int(ARGV[1])))) do
  local o = read_offer(id, now)
  if o and is_live(o, now) and not is_dry(o.capacity - o.burned - o.held, floor) then
    local r = routable(o)
    if r > 0 then
      out[#out + 1] = o.ask
      out[#out + 1] = s(r)
    end
  end
end
return out
