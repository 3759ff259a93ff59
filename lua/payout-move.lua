--[[
  payout-move: one step of a payout's life, taken by the holder of the payout wallet's sender lock
  only (the fencing token is checked here, so a sender whose lock lapsed changes nothing):
    signed     sending, no transaction yet: records from, nonce, txHash and the signed rawTx,
               before it is broadcast (a crash after this rebroadcasts the same transaction)
    included   sending -> pending: its transaction is mined; records the block (again, when a
               reorg mined it in another block)
    dropped    pending -> sending: a reorg took its transaction out of the chain; the recorded
               bytes stay, to be broadcast again (the same hash and nonce: never paid twice)
    confirmed  pending -> confirmed: pending -= amount, paidOut += amount
    failed     sending | pending -> failed: pending -= amount (payable again); records why
  Taking a step already taken answers 0 and changes nothing; any other move is refused.
  Includes lib/keys, lib/numbers.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  payout id
  ARGV[2]  step: signed | included | dropped | confirmed | failed
  ARGV[3]  the payout wallet, lower case (names the lock)
  ARGV[4]  the fencing token the lock must hold
  ARGV[5..] signed: from, nonce, txHash, rawTx; included: txHash, blockNumber;
            confirmed: blockNumber; failed: error; dropped: txHash

  Returns {1} moved, {0} already so, or
    {-1}         unknown payout
    {-2, state}  not a legal step from its state
    {-3}         the lock is not held with this token
]]

local id, step = ARGV[1], ARGV[2]
if rcall('GET', k_payout_lock(ARGV[3])) ~= ARGV[4] then return { -3 } end
local payout = k_payout(id)
local p = rcall('HMGET', payout, 'state', 'txHash', 'amount', 'supplierId', 'blockNumber')
local state, tx = p[1], p[2]
if not state then return { -1 } end
local now = s(now_ms())

if step == 'signed' then
  if tx then
    if state ~= 'failed' and tx == ARGV[7] then return { 0 } end
    return { -2, state }
  end
  if state ~= 'sending' then return { -2, state } end
  rcall('HSET', payout, 'from', ARGV[5], 'nonce', ARGV[6], 'txHash', ARGV[7], 'rawTx', ARGV[8],
    'updatedAt', now)
  return { 1 }
end

if step == 'included' then
  if state == 'pending' and tx == ARGV[5] then
    if p[5] == ARGV[6] then return { 0 } end
    rcall('HSET', payout, 'blockNumber', ARGV[6], 'updatedAt', now)
    return { 1 }
  end
  if state ~= 'sending' or not tx or tx ~= ARGV[5] then return { -2, state } end
  rcall('HSET', payout, 'state', 'pending', 'blockNumber', ARGV[6], 'updatedAt', now)
  return { 1 }
end

if step == 'dropped' then
  if state == 'sending' and tx == ARGV[5] and not p[5] then return { 0 } end
  if state ~= 'pending' or tx ~= ARGV[5] then return { -2, state } end
  rcall('HSET', payout, 'state', 'sending', 'updatedAt', now)
  rcall('HDEL', payout, 'blockNumber')
  return { 1 }
end

local amount = int(p[3])
local supplier = k_supplier(p[4])
if step == 'confirmed' then
  if state == 'confirmed' then return { 0 } end
  if state ~= 'pending' then return { -2, state } end
  rcall('HSET', payout, 'state', 'confirmed', 'blockNumber', ARGV[5], 'updatedAt', now)
  rcall('HINCRBY', supplier, 'pending', s(-amount))
  rcall('HINCRBY', supplier, 'paidOut', s(amount))
  rcall('ZREM', K_PAYOUTS_OPEN, id)
  return { 1 }
end

if step == 'failed' then
  if state == 'failed' then return { 0 } end
  if state ~= 'sending' and state ~= 'pending' then return { -2, state } end
  rcall('HSET', payout, 'state', 'failed', 'error', ARGV[5], 'updatedAt', now)
  rcall('HINCRBY', supplier, 'pending', s(-amount))
  rcall('ZREM', K_PAYOUTS_OPEN, id)
  return { 1 }
end
return { -2, state }
