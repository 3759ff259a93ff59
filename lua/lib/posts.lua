-- lib/posts: the offer's side of a clear held apart (lua/clear.lua with offerApart charged the
-- account): the reservation posts what the account's side billed. The capacity it held and its
-- slot go back, the burn is recorded, the supplier earns what the buyer paid less the fee, a
-- self-served offer's fill is appended, and the request counts in its model's usage stats for the
-- day on the offer's slot (src/records/stats.ts sums them over the offers). A reservation the
-- reaper voided first (a late clear: the capacity went back already) still records the burn and
-- the earnings. A reservation the offer's slot no longer has (its master failed over before the
-- reservation reached a replica, while the account's side cleared it) is posted all the same from
-- what the post carries, its capacity never held on the promoted master, and marked lost.
-- Idempotent by attempt id: a posted reservation is left as it is.
-- Posts come alone (lua/post.lua) or carried on the offer's next reservation (lua/reserve.lua),
-- several at a time: a replica queues them per offer (src/market/post-queue.ts). The offer's row
-- is read and written once for all of them (and with the reservation's own read and write when
-- carried): sums per offer, in `batch`.

-- The values of one post, in ARGV order from its first.
local POST_VALUES = 11

-- The offer's balance as a batch learned it: the last posted on its upstream generation now (`gen`,
-- the offer's upstreamGen as read, '0' when absent), kept per generation so that a request on an
-- upstream changed since (or sent with none: an admission that did not say), ending after one on
-- the current upstream, does not hide that one's. Returns the balance and its day, or nil.
local function batch_balance(b, gen)
  local learned = b.balances[gen]
  if learned then return learned[1], learned[2] end
end

-- Posts one reservation's side, its offer's sums added to batch[offerId] for a later write
-- (write_batch, or the reservation's own). offer_id: the offer the posts were sent to, and ask the
-- clear's: what a lost reservation is posted on. balance_day: the UTC day the balance holds on, as
-- the account's side found it (lua/clear.lua's reply; '' with no balance); gen: the upstream generation
-- the request was reserved on (reserve's reply; '' not known). Returns 1 posted, 2
-- posted as lost, 0 already posted, -1 no such reservation nor offer. The record retention is set.
local function post_reservation(id, burn_s, earned_s, fee_s, disputed_s, balance, balance_day, ask, model, gen,
  cleared_at, offer_id, now, batch)
  local reservation = k_reservation(id)
  local r = rcall('HMGET', reservation, 'state', 'offerId', 'holdDiem', 'askCents')
  local lost = not r[1]
  if lost then
    -- Never a ghost: the offer must still be there.
    if rcall('EXISTS', k_offer(offer_id)) == 0 then return -1 end
    r = { 'lost', offer_id, '0', ask }
  end
  if r[1] == 'posted' then
    -- Cleared again on the account's side with another charge: its master lost the admission and
    -- the clear in a failover, and the clear sent again charged what the balance then had (a lost
    -- admission's late clear). The supplier keeps what the first post paid; the gap is the
    -- market's, kept on the reservation and summed on the offer (uncovered) for the audit.
    local p = rcall('HMGET', reservation, 'earnedUsdc', 'feeUsdc', 'uncovered')
    local gap = stored(p[1]) + stored(p[2]) - (int(earned_s) + int(fee_s))
    local was = p[3] and stored(p[3]) or 0
    if gap ~= was then
      rcall('HSET', reservation, 'uncovered', s(gap))
      rcall('HINCRBY', k_offer(r[2]), 'uncovered', s(gap - was))
    end
    return 0
  end
  local b = batch[r[2]]
  if not b then
    b = { held = 0, inflight = 0, burned = 0, earned = 0, fees = 0, disputed = 0, balances = {}, fills = {} }
    batch[r[2]] = b
  end
  -- A voided reservation (a late clear) gave its capacity back already: only what it billed counts.
  -- Its burn came after its capacity went back (another request may have taken it), so it may pass
  -- what the offer posted: the account's side charged it without the offer's row, which one slot's
  -- clear reads to cap it. It is recorded as late (lateBurned), which the audit allows past capacity;
  -- a lost reservation's burn held no capacity on this master either.
  if r[1] == 'reserved' then
    b.held, b.inflight = b.held + stored(r[3]), b.inflight + 1
  end
  -- Reserved, or voided and still watched by the reaper (lua/void.lua): nothing left to look at.
  if not lost then rcall('ZREM', K_LEASES, id) end
  if r[1] ~= 'reserved' and int(burn_s) > 0 and (lost or rcall('EXISTS', k_offer(r[2])) == 1) then
    rcall('HINCRBY', k_offer(r[2]), 'lateBurned', burn_s)
  end
  b.burned, b.earned, b.fees = b.burned + int(burn_s), b.earned + int(earned_s), b.fees + int(fee_s)
  b.disputed = capped_sum(b.disputed, int(disputed_s))
  -- A balance of an earlier UTC day (posted after midnight) no longer holds: the allocation reset.
  if balance ~= '' and balance_day ~= '' and int(balance_day) >= day_of(now) then
    b.balances[gen or ''] = { balance, balance_day }
  end
  -- Cleared in an earlier UTC hour than this post (carried late, or posted by the reaper): the fill
  -- and the served request count at the clear's time, as one slot's clear counts them.
  local at = nil
  if cleared_at and cleared_at ~= '' and floor(int(cleared_at) / 3600000) < floor(now / 3600000) then
    at = cleared_at
  end
  local fills = b.fills
  fills[#fills + 1] = { model, burn_s, r[4], earned_s, at }
  rcall('HSET', reservation, 'state', 'posted', 'burnDiem', burn_s, 'earnedUsdc', earned_s, 'feeUsdc', fee_s)
  if lost then rcall('HSET', reservation, 'offerId', offer_id, 'askCents', ask, 'lost', '1') end
  rcall('PEXPIRE', reservation, record_ttl_ms)
  count_served(model, at and int(at) or now)
  return lost and 2 or 1
end

-- Every post in argv (the script's ARGV: a library function has none of its own) from `first` on
-- (POST_VALUES each: attemptId, burn, earned, fee, disputed, upstreamBalance, balanceDay, askCents,
-- model, upstreamGen, clearedAt), all sent to offer_id, summed into batch; returns each one's
-- post_reservation code, in order.
local function post_all(argv, first, now, batch, offer_id)
  local codes = {}
  for i = first, #argv - POST_VALUES + 1, POST_VALUES do
    codes[#codes + 1] = post_reservation(argv[i], argv[i + 1], argv[i + 2], argv[i + 3], argv[i + 4], argv[i + 5],
      argv[i + 6], argv[i + 7], argv[i + 8], argv[i + 9], argv[i + 10], offer_id, now, batch)
  end
  return codes
end

-- An offer's fields after a batch's sums b: o is its row as read with OFFER_CLEAR_FIELDS (held,
-- inflight, burned, earned, capacity, fees, disputed, supplierId, upstreamGen). held and inflight are returned
-- apart (a reservation adds its own before writing), the rest as HSET's field list.
local function batch_fields(b, o)
  local fields = { 'burned', s(stored(o[3]) + b.burned), 'earned', s(stored(o[4]) + b.earned) }
  -- usually none: no field for it
  if b.fees > 0 then fields[#fields + 1], fields[#fields + 2] = 'fees', s(stored(o[6]) + b.fees) end
  if b.disputed > 0 then
    fields[#fields + 1], fields[#fields + 2] = 'disputed', s(capped_sum(stored(o[7]), b.disputed))
  end
  local balance, balance_day = batch_balance(b, o[9] or '0')
  if balance then
    fields[#fields + 1], fields[#fields + 2], fields[#fields + 3], fields[#fields + 4] =
      'balance', balance, 'balanceDay', balance_day
  end
  return stored(o[1]) - b.held, stored(o[2]) - b.inflight, fields
end

-- A self-served offer's fills, one per post of the batch.
local function append_fills(b, supplier_id, offer_id, now)
  if not supplier_id then return end
  for _, f in ipairs(b.fills) do append_fill(supplier_id, offer_id, f[1], f[2], f[3], f[4], now, f[5]) end
end

-- Writes each offer's sums: one read and one write per offer. Offers are only ever marked deleted;
-- a hash gone by hand is not brought back as a ghost.
local function write_batch(batch, now)
  for offer_id, b in pairs(batch) do
    local offer = k_offer(offer_id)
    local o = rcall('HMGET', offer, unpack(OFFER_CLEAR_FIELDS))
    if o[1] then
      local held, inflight, fields = batch_fields(b, o)
      rcall('HSET', offer, 'held', s(held), 'inflight', s(inflight), unpack(fields))
      append_fills(b, o[8], offer_id, now)
    end
  end
end
