--[[
  clear: settle one admitted attempt from its actual burn. The buyer pays
  cost = ceil(burn x ask / 100) micro-USDC out of the hold, the rest of the hold goes back, the
  offer's capacity is burned, the supplier earns cost - fee (the offer keeps the fee beside its
  earnings, so buyer spend + written off = earnings + fees, summed over accounts and offers), the
  lease and slots are released, and
  the attempt record keeps it all (it is the request's record from then on), and the request counts
  once in its model's usage stats for the day.
  Idempotent: clearing a cleared attempt changes nothing (and counts nothing again).
  Includes lib/keys, lib/numbers, lib/attempts.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  attempt id
  ARGV[2]  burn, micro-DIEM (metered, or estimated when the stream ended without usage)
  ARGV[3]  platform fee, basis points (0..10000)
  ARGV[4]  the supplier key's upstream balance after this request, micro-DIEM ("" unknown)
  ARGV[5]  input tokens
  ARGV[6]  output tokens
  ARGV[7]  "1" when the usage was estimated, "0" when metered
  ARGV[8]  outcome: completed | incomplete
  ARGV[9]  how long the ended attempt is kept as the request's record, ms (default 30 days)

  Burn is capped at what the offer has left, so an offer never burns more than it posted. The
  buyer is never charged more than the hold; a late clear (the lease was reaped, the hold already
  returned) charges at most the confirmed balance. What is not charged is recorded as written off.

  Returns {1, charged, cost, burn, askCents, confirmedAfter, writtenOff, replay(0|1)} or
    {-1}   unknown attempt
    {-2}   the attempt was released (failed): nothing to clear
]]

local id = ARGV[1]
local a = read_attempt(id)
if not a then return { -1 } end
local account = k_account(a.accountId)
if a.state == 'cleared' then
  local c = read_cleared(a)
  return { 1, c[1], c[2], c[3], int(a.askCents), rcall('HGET', account, 'confirmed'), c[4] or '0', 1 }
end
if a.state == 'released' then return { -2 } end

local now = now_ms()
keep_records_for(ARGV[9])
local fee_bps = int(ARGV[3])
local ask = int(a.askCents)
local offer = k_offer(a.offerId)
-- Read once: the unwind below writes from the same row.
local o = rcall('HMGET', offer, unpack(OFFER_SETTLE_FIELDS))
local left = int(o[5]) - int(o[3])
if left < 0 then left = 0 end
local burn = int(ARGV[2])
if burn > left then burn = left end

local cost = ceil_div(burn * ask, 100)
local fee = idiv(cost * fee_bps, 10000)
local charged, confirmed
if a.state == 'admitted' then
  charged = math.min(cost, int(a.holdUsdc))
  confirmed = unwind_attempt(a, charged, o, burn, cost - fee, fee, ARGV[4])
else
  -- reaped: the hold went back already; take what the balance can pay, never below zero
  confirmed = int(rcall('HGET', account, 'confirmed'))
  charged = math.min(cost, confirmed)
  if charged > 0 then
    confirmed = confirmed - charged
    rcall('HINCRBY', account, 'confirmed', s(-charged))
    rcall('HINCRBY', account, 'spent', s(charged))
  end
  rcall('HINCRBY', offer, 'burned', s(burn))
  rcall('HINCRBY', offer, 'earned', s(cost - fee))
  if fee > 0 then rcall('HINCRBY', offer, 'fees', s(fee)) end
  if ARGV[4] ~= '' then rcall('HSET', offer, 'balance', ARGV[4]) end
end
local written_off = cost - charged
if written_off > 0 then rcall('HINCRBY', account, 'writtenOff', s(written_off)) end

-- Each number formatted once, for the record and the reply.
local burn_s, cost_s, charged_s = s(burn), s(cost), s(charged)
local final = { 'state', 'cleared', 'burn', burn_s, 'cost', cost_s, 'costUsdc', charged_s,
  'inputTokens', ARGV[5], 'outputTokens', ARGV[6], 'outcome', ARGV[8], 'endedAt', s(now) }
-- Usually zero or no, and then not written (a missing field reads as 0).
if fee > 0 then final[#final + 1], final[#final + 2] = 'fee', s(fee) end
if written_off > 0 then final[#final + 1], final[#final + 2] = 'writtenOff', s(written_off) end
if ARGV[7] == '1' then final[#final + 1], final[#final + 2] = 'estimated', '1' end
if a.state == 'reaped' then final[#final + 1], final[#final + 2] = 'lateClear', '1' end
end_attempt(a, final)
count_served(a.model, now)
return { 1, charged_s, cost_s, burn_s, ask, s(confirmed), written_off > 0 and s(written_off) or '0', 0 }
