--[[
  payout-create: a supplier asks for a payout. In one step: the supplier must exist and be active,
  the amount must be at least the minimum and at most payable (earned, summed here over its
  offers or read from them by the caller, less paid out, less pending), and the amount moves
  from payable to pending as the payout is created in `sending` (the sender signs and broadcasts
  it). Concurrent requests on any replica serialize here, so payable never goes below zero. An
  Idempotency-Key used again with the same amount answers the payout it made (whatever happened
  since); with another amount it is refused. A refusal changes nothing.
  Includes lib/keys, lib/numbers.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  supplierId: supplier id
  ARGV[2]  payoutId: a fresh payout id, used when the key is new
  ARGV[3]  amount: amount, micro-USDC (a positive integer)
  ARGV[4]  idempotencyDigest: SHA-256 hex of the Idempotency-Key
  ARGV[5]  minimum: the minimum payout, micro-USDC
  ARGV[6]  earned: what the supplier's offers have earned at least, micro-USDC, as the caller read
           them on their own slots (a market held apart); "" sums them here. Earnings only grow, so
           a read is a lower bound, and no payout can take more than was earned.

  The loop over the supplier's offers is bounded: offer-put refuses a supplier's offer past
  MAX_POSTED (lua/offer-put.lua).

  Returns {1, payoutId, created (1|0)} or
    {-1}               unknown supplier
    {-2}               the supplier is suspended
    {-3}               amount below the minimum
    {-4, payable}      amount above payable
    {-5, payoutId}     the Idempotency-Key made a payout of another amount
    {-6}               the fresh payout id is taken (retry with another)
]]

local supplier_id, id, amount, digest = ARGV[1], ARGV[2], int(ARGV[3]), ARGV[4]
local supplier = k_supplier(supplier_id)
local f = rcall('HMGET', supplier, 'id', 'status', 'wallet', 'paidOut', 'pending')
if not f[1] then return { -1 } end

local key = k_payout_key(supplier_id, digest)
local existing = rcall('GET', key)
if existing then
  if int(rcall('HGET', k_payout(existing), 'amount')) ~= amount then return { -5, existing } end
  return { 1, existing, 0 }
end

if f[2] == 'suspended' then return { -2 } end
if amount < int(ARGV[5]) then return { -3 } end
local earned = 0
if ARGV[6] ~= '' then
  earned = int(ARGV[6])
else
  for _, offer_id in ipairs(rcall('SMEMBERS', k_supplier_offers(supplier_id))) do
    earned = earned + int(rcall('HGET', k_offer(offer_id), 'earned'))
  end
end
local payable = earned - int(f[4]) - int(f[5])
if amount > payable then return { -4, s(payable < 0 and 0 or payable) } end

local payout = k_payout(id)
if rcall('EXISTS', payout) == 1 then return { -6 } end
local now = s(now_ms())
rcall('HINCRBY', supplier, 'pending', s(amount))
rcall('HSET', payout, 'id', id, 'supplierId', supplier_id, 'wallet', f[3], 'amount', s(amount),
  'idempotencyKey', digest, 'state', 'sending', 'createdAt', now, 'updatedAt', now)
rcall('SET', key, id)
rcall('ZADD', k_supplier_payouts(supplier_id), now, id)
rcall('ZADD', K_PAYOUTS_OPEN, now, id)
return { 1, id, 1 }
