-- lib/posts: the offer's side of a clear held apart (lua/clear.lua with offerApart charged the
-- account): the reservation posts what the account's side billed. The capacity it held and its
-- slot go back, the burn is recorded, the supplier earns what the buyer paid less the fee, a
-- self-served offer's fill is appended, and the request counts in its model's usage stats for the
-- day on the offer's slot (src/records/stats.ts sums them over the offers). A reservation the
-- reaper voided first (a late clear: the capacity went back already) still records the burn and
-- the earnings. Idempotent by attempt id: a posted reservation is left as it is.
-- Posts come alone (lua/post.lua) or carried on the offer's next reservation (lua/reserve.lua),
-- several at a time: a replica queues them per offer (src/market/post-queue.ts).

-- The values of one post, in ARGV order from its first.
local POST_VALUES = 7

-- Returns 1 posted, 0 already posted, -1 no such reservation. The record retention is set.
local function post_reservation(id, burn_s, earned_s, fee_s, disputed_s, balance, model, now)
  local reservation = k_reservation(id)
  local r = rcall('HMGET', reservation, 'state', 'offerId', 'holdDiem', 'askCents')
  if not r[1] then return -1 end
  if r[1] == 'posted' then return 0 end
  local burn, earned, fee, disputed = int(burn_s), int(earned_s), int(fee_s), int(disputed_s)
  local offer = k_offer(r[2])
  local o = rcall('HMGET', offer, unpack(OFFER_CLEAR_FIELDS))
  if r[1] == 'reserved' then
    unwind_reservation(r[2], r[3], o, burn, earned, fee, balance, disputed)
    rcall('ZREM', K_LEASES, id)
  elseif o[1] then
    rcall('HINCRBY', offer, 'burned', burn_s)
    rcall('HINCRBY', offer, 'earned', earned_s)
    if fee > 0 then rcall('HINCRBY', offer, 'fees', fee_s) end
    if disputed > 0 then rcall('HSET', offer, 'disputed', s(capped_sum(int(o[7]), disputed))) end
    if balance ~= '' then rcall('HSET', offer, 'balance', balance) end
  end
  rcall('HSET', reservation, 'state', 'posted', 'burnDiem', burn_s, 'earnedUsdc', earned_s, 'feeUsdc', fee_s)
  rcall('PEXPIRE', reservation, record_ttl_ms)
  if o[8] then append_fill(o[8], r[2], model, burn_s, r[4], earned_s, now) end
  count_served(model, now)
  return 1
end

-- Every post in argv (the script's ARGV: a library function has none of its own) from `first` on
-- (POST_VALUES each: attemptId, burn, earned, fee, disputed, upstreamBalance, model); returns each
-- one's post_reservation code, in order.
local function post_all(argv, first, now)
  local codes = {}
  for i = first, #argv - POST_VALUES + 1, POST_VALUES do
    codes[#codes + 1] = post_reservation(argv[i], argv[i + 1], argv[i + 2], argv[i + 3], argv[i + 4], argv[i + 5],
      argv[i + 6], now)
  end
  return codes
end
