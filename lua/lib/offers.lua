-- lib/offers: reading an offer and the one eligibility rule that admit and capacity share.
-- balanceDay, last in both: the UTC day (lib/numbers day_of) the balance was learned on; before it
-- upstreamGen, the offer's upstream generation (lua/offer-put.lua; absent: 0).
local OFFER_FIELDS = { 'status', 'askCents', 'capacity', 'burned', 'held', 'balance', 'maxInFlight',
  'inflight', 'cooldownUntil', 'upstreamBaseUrl', 'upstreamKeyEnc', 'upstreamGen', 'balanceDay' }

-- A reservation's read (lua/reserve.lua): OFFER_FIELDS, then the supplier's suspension copied onto
-- the offer, and what the posts it carries add to (lib/posts): one read for all of them.
local RESERVE_FIELDS = { 'status', 'askCents', 'capacity', 'burned', 'held', 'balance', 'maxInFlight',
  'inflight', 'cooldownUntil', 'upstreamBaseUrl', 'upstreamKeyEnc', 'suspended', 'earned', 'fees', 'disputed',
  'supplierId', 'upstreamGen', 'balanceDay' }

-- now: the time now, ms (the balance's day is checked against it); fields: OFFER_FIELDS unless
-- given (RESERVE_FIELDS). The row as read is returned second.
local function read_offer(id, now, fields)
  fields = fields or OFFER_FIELDS
  local f = rcall('HMGET', k_offer(id), unpack(fields))
  if not f[1] then return nil end
  -- An empty balance: the upstream has not reported one yet. One learned on an earlier UTC day (or
  -- on none) is not known either: the supplier key's allocation was reset at 00:00 UTC since.
  local balance = f[6]
  if not balance or balance == '' or int(f[#fields]) < day_of(now) then balance = nil else balance = int(balance) end
  return {
    id = id,
    status = f[1],
    ask = int(f[2]),
    capacity = int(f[3]),
    burned = int(f[4]),
    held = int(f[5]),
    balance = balance,
    max_in_flight = int(f[7]),
    inflight = int(f[8]),
    cooldown_until = int(f[9]),
    -- what the supplier call needs, read here so that admit makes no second call for it
    upstream_base_url = f[10],
    upstream_key_enc = f[11],
    -- the upstream the request is sent to: what its end compares before recording a balance
    upstream_gen = f[#fields - 1] or '0',
  }, f
end

-- Routable capacity: what is left of the posted capacity, capped by the supplier key's upstream
-- balance known today (read_offer), minus what in-flight requests hold.
local function routable(o)
  local left = o.capacity - o.burned
  if o.balance ~= nil and o.balance < left then left = o.balance end
  local r = left - o.held
  if r < 0 then return 0 end
  return r
end

-- Offers that count as supply right now: active and not cooling down after upstream errors.
local function is_live(o, now)
  return o.status == 'active' and o.cooldown_until <= now
end

-- A ladder score orders by ask, then by posting order, so ties break stably.
local LADDER_STEP = 1000000000
local function ladder_ceiling(max_cents)
  return (max_cents + 1) * LADDER_STEP - 1
end

-- The same, formatted for ZRANGEBYSCORE: made once per max price (a few distinct ones, in cents).
local ceilings = {}
local function ladder_ceiling_s(max_cents)
  local v = ceilings[max_cents]
  if not v then
    v = s(ladder_ceiling(max_cents))
    if max_cents >= 0 and max_cents < 1024 then ceilings[max_cents] = v end
  end
  return v
end
