-- lib/attempts: giving back everything an admitted attempt holds. Release (failure), reap
-- (expired lease) and clear all end an attempt through here, so nothing is returned twice.

local function decr_inflight(field)
  if rcall('HINCRBY', K_INFLIGHT, field, -1) <= 0 then rcall('HDEL', K_INFLIGHT, field) end
end

-- Returns the attempt's hold to the buyer and its capacity and slot to the offer.
-- charge: micro-USDC moved from the hold to spent (0 on failure).
local function unwind_attempt(a, charge)
  local account = k_account(a.accountId)
  local hold = int(a.holdUsdc)
  rcall('HINCRBY', account, 'held', s(-hold))
  if hold - charge ~= 0 then rcall('HINCRBY', account, 'confirmed', s(hold - charge)) end
  if charge > 0 then rcall('HINCRBY', account, 'spent', s(charge)) end
  local offer = k_offer(a.offerId)
  if rcall('EXISTS', offer) == 1 then
    rcall('HINCRBY', offer, 'held', s(-int(a.holdDiem)))
    rcall('HINCRBY', offer, 'inflight', -1)
  end
  decr_inflight('k:' .. a.keyId)
  decr_inflight('a:' .. a.accountId)
  if a.lane and a.lane ~= '' then decr_inflight(a.lane .. ':' .. a.accountId) end
  rcall('ZREM', K_LEASES, a.id)
end

local function read_attempt(id)
  local flat = rcall('HGETALL', k_attempt(id))
  if #flat == 0 then return nil end
  local a = {}
  for i = 1, #flat, 2 do a[flat[i]] = flat[i + 1] end
  return a
end

-- Ends the record of an attempt: the whole attempt hash goes onto the ended-attempts stream in
-- the same script that ended it, so the write-behind worker (src/records) can never miss one.
-- An ended attempt is kept a week: long enough for any replayed clear to find it (and be a
-- no-op) and for a late result after a reap; its lasting record is the request record.
local ENDED_ATTEMPT_TTL_MS = 7 * 86400 * 1000

local function record_ended(id)
  rcall('XADD', K_ATTEMPTS_ENDED, '*', unpack(rcall('HGETALL', k_attempt(id))))
  rcall('PEXPIRE', k_attempt(id), ENDED_ATTEMPT_TTL_MS)
end
