--[[
  post: the offer's side of a clear whose account was charged apart (lua/clear.lua with
  offerApart): the reservation posts what the account side billed. The capacity it held and its
  slot go back, the burn is recorded, the supplier earns what the buyer paid less the fee, and a
  self-served offer's fill is appended, and the request counts in its model's usage stats for the
  day on the offer's slot (src/records/stats.ts sums them over the offers). A reservation the reaper voided first (a late clear: the
  capacity went back already) still records the burn and the earnings. Idempotent by attempt id:
  a posted reservation is left as it is.
  Includes lib/keys, lib/numbers, lib/record, lib/attempts.

  KEYS[1]  the offer's keyspace base
  ARGV[1]  attemptId: attempt id
  ARGV[2]  burn: the billed burn, micro-DIEM (clear's reply)
  ARGV[3]  earned: what the supplier earns, micro-USDC (charged less the fee)
  ARGV[4]  fee: the platform's fee, micro-USDC
  ARGV[5]  disputed: burn reported beyond what was billed, micro-DIEM
  ARGV[6]  upstreamBalance: the supplier key's upstream balance after, micro-DIEM ("" unknown)
  ARGV[7]  model: model id (for the supplier's fill)
  ARGV[8]  recordRetentionMs: how long the supplier's fill and the posted reservation are kept, ms

  Returns {1} posted; {0} already posted; {-1} no such reservation.
]]
local id = ARGV[1]
local reservation = k_reservation(id)
local r = rcall('HMGET', reservation, 'state', 'offerId', 'holdDiem', 'askCents')
if not r[1] then return { -1 } end
if r[1] == 'posted' then return { 0 } end
keep_records_for(ARGV[8])
local now = now_ms()
local burn, earned, fee, disputed = int(ARGV[2]), int(ARGV[3]), int(ARGV[4]), int(ARGV[5])
local offer = k_offer(r[2])
local o = rcall('HMGET', offer, unpack(OFFER_CLEAR_FIELDS))
if r[1] == 'reserved' then
  unwind_reservation(r[2], r[3], o, burn, earned, fee, ARGV[6], disputed)
  rcall('ZREM', K_LEASES, id)
elseif o[1] then
  rcall('HINCRBY', offer, 'burned', s(burn))
  rcall('HINCRBY', offer, 'earned', s(earned))
  if fee > 0 then rcall('HINCRBY', offer, 'fees', s(fee)) end
  if disputed > 0 then rcall('HSET', offer, 'disputed', s(capped_sum(int(o[7]), disputed))) end
  if ARGV[6] ~= '' then rcall('HSET', offer, 'balance', ARGV[6]) end
end
rcall('HSET', reservation, 'state', 'posted', 'burnDiem', ARGV[2], 'earnedUsdc', ARGV[3], 'feeUsdc', ARGV[4])
rcall('PEXPIRE', reservation, record_ttl_ms)
if o[8] then append_fill(o[8], r[2], ARGV[7], ARGV[2], r[4], ARGV[3], now) end
count_served(ARGV[7], now)
return { 1 }
