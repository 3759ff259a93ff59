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

-- The offer read last: one table, every field of it set again by each read (lib/holds keeps its
-- request the same way), so that an offer walked costs Lua's collector no table. A caller holds one
-- offer at a time: the next read replaces it.
local OFFER = {}

-- now: the time now, ms (the balance's day is checked against it); fields: OFFER_FIELDS unless
-- given (RESERVE_FIELDS). The row as read is returned second.
local function read_offer(id, now, fields)
  local f
  if fields then
    f = rcall('HMGET', k_offer(id), unpack(fields))
  else
    -- OFFER_FIELDS, named here: admit's read, for every offer it walks, makes no unpack call.
    fields = OFFER_FIELDS
    f = rcall('HMGET', k_offer(id), 'status', 'askCents', 'capacity', 'burned', 'held', 'balance', 'maxInFlight',
      'inflight', 'cooldownUntil', 'upstreamBaseUrl', 'upstreamKeyEnc', 'upstreamGen', 'balanceDay')
  end
  if not f[1] then return nil end
  -- An empty balance: the upstream has not reported one yet. One learned on an earlier UTC day (or
  -- on none) is not known either: the supplier key's allocation was reset at 00:00 UTC since.
  local balance = f[6]
  if not balance or balance == '' or stored(f[#fields]) < day_of(now) then balance = nil else balance = stored(balance) end
  local o = OFFER
  o.id, o.status, o.ask, o.capacity, o.burned, o.held = id, f[1], stored(f[2]), stored(f[3]), stored(f[4]), stored(f[5])
  o.balance, o.max_in_flight, o.inflight, o.cooldown_until = balance, stored(f[7]), stored(f[8]), stored(f[9])
  -- what the supplier call needs, read here so that admit makes no second call for it
  o.upstream_base_url, o.upstream_key_enc = f[10], f[11]
  -- the upstream the request is sent to: what its end compares before recording a balance
  o.upstream_gen = f[#fields - 1] or '0'
  return o, f
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
