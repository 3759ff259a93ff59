-- lib/attempts: giving back everything an admitted attempt holds. Release (failure), reap
-- (expired lease) and clear all end an attempt through here, so nothing is returned twice.

-- Each hash is read once and written once: every call counts on the hot path, and inside one
-- script a read-then-write is as atomic as HINCRBY.

-- The attempt's in-flight counts come down by one; a count at zero is removed.
local function release_slots(a)
  local fields = { 'k:' .. a.keyId, 'a:' .. a.accountId }
  if a.lane and a.lane ~= '' then fields[3] = a.lane .. ':' .. a.accountId end
  local counts = rcall('HMGET', K_INFLIGHT, unpack(fields))
  local set, gone = {}, {}
  for i, field in ipairs(fields) do
    local n = int(counts[i]) - 1
    if n > 0 then
      set[#set + 1] = field
      set[#set + 1] = s(n)
    else
      gone[#gone + 1] = field
    end
  end
  if #set > 0 then rcall('HSET', K_INFLIGHT, unpack(set)) end
  if #gone > 0 then rcall('HDEL', K_INFLIGHT, unpack(gone)) end
end

-- Returns the attempt's hold to the buyer and its capacity and slot to the offer.
-- charge: micro-USDC moved from the hold to spent (0 on failure).
-- settled: for a clear, {burn, earned, fee, balance, offer} the offer records in the same write,
-- where offer is its row as clear read it (OFFER_SETTLE_FIELDS: read once per clear); else nil.
-- Returns the account's confirmed balance after.
local OFFER_SETTLE_FIELDS = { 'held', 'inflight', 'burned', 'earned', 'capacity', 'fees' }
local function unwind_attempt(a, charge, settled)
  local account = k_account(a.accountId)
  local hold = int(a.holdUsdc)
  local b = rcall('HMGET', account, 'held', 'confirmed', 'spent')
  local confirmed = int(b[2]) + hold - charge
  rcall('HSET', account, 'held', s(int(b[1]) - hold), 'confirmed', s(confirmed), 'spent', s(int(b[3]) + charge))
  local offer = k_offer(a.offerId)
  local o = settled and settled.offer or rcall('HMGET', offer, unpack(OFFER_SETTLE_FIELDS))
  -- Offers are only ever marked deleted; a hash gone by hand is not brought back as a ghost.
  if o[1] then
    local fields = { 'held', s(int(o[1]) - int(a.holdDiem)), 'inflight', s(int(o[2]) - 1) }
    if settled then
      fields[5], fields[6] = 'burned', s(int(o[3]) + settled.burn)
      fields[7], fields[8] = 'earned', s(int(o[4]) + settled.earned)
      -- usually none: no field for it
      if settled.fee > 0 then fields[#fields + 1], fields[#fields + 2] = 'fees', s(int(o[6]) + settled.fee) end
      if settled.balance ~= '' then fields[#fields + 1], fields[#fields + 2] = 'balance', settled.balance end
    end
    rcall('HSET', offer, unpack(fields))
  end
  release_slots(a)
  rcall('ZREM', K_LEASES, a.id)
  return confirmed
end

local function read_attempt(id)
  local flat = rcall('HGETALL', k_attempt(id))
  if #flat == 0 then return nil end
  local a = {}
  for i = 1, #flat, 2 do a[flat[i]] = flat[i + 1] end
  return a
end

-- An ended attempt is its request's record: GET /v1/agent/requests/{support_reference} reads the
-- attempt hashes themselves, so an attempt's record is written in the same script that ends it
-- and nothing is copied afterwards. It is kept for the record retention (SVC_RECORD_RETENTION_DAYS),
-- which each script that ends attempts sets from its ARGV; long enough too for any replayed clear
-- to find it (and be a no-op) and for a late result after a reap.
local record_ttl_ms = 30 * 86400 * 1000

-- Ends an attempt read as `a` with its final fields (a flat name, value list): one write, and
-- the record kept for the retention.
local function end_attempt(a, final)
  rcall('HSET', k_attempt(a.id), unpack(final))
  for i = 1, #final, 2 do a[final[i]] = final[i + 1] end
  rcall('PEXPIRE', k_attempt(a.id), record_ttl_ms)
end

-- Usage stats: a served request counts once in its model's bucket for the day it ended.
local STATS_TTL_S = 32 * 86400
local function count_served(model, now)
  local day = k_stats_day(utc_day(now))
  if rcall('HINCRBY', day, model, 1) == 1 then rcall('EXPIRE', day, STATS_TTL_S) end
end
