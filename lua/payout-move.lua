--[[
  payout-move: one step of a payout's life, taken by the holder of the payout wallet's sender lock
  only (the fencing token is checked here, so a sender whose lock lapsed changes nothing):
    signed     sending, no transaction yet, the supplier not suspended: records from, nonce,
               txHash, the signed rawTx and the block it was signed at, before it is broadcast (a
               crash after this rebroadcasts the same transaction); hashes starts with txHash;
               the wallet's next nonce is raised past it
    bumped     sending, signed: the same nonce signed again with a higher fee; its hash is added to
               hashes (every hash signed is kept: only one of them can ever be mined) and it
               becomes txHash and rawTx, the bytes broadcast from now on
    withheld   sending, never signed, the supplier suspended -> failed: pending -= amount
               (payable again); a signed payout is never withheld (its transfer may be mined)
    included   sending -> pending: one of its hashes is mined; records it as txHash and the block
               (again, when a reorg mined it in another block, or another of its hashes instead)
    dropped    pending -> sending: a reorg took its transaction out of the chain; the recorded
               bytes stay, to be broadcast again (the same hash and nonce: never paid twice)
    confirmed  pending -> confirmed: pending -= amount, paidOut += amount
    failed     sending | pending -> failed: pending -= amount (payable again); records why
  Taking a step already taken answers 0 and changes nothing; any other move is refused. A payout
  is signed under the lock of the wallet that signs it (from), and once signed moved only under
  that wallet's lock: after a key rotation the old wallet's lock, whoever follows its payouts.
  confirmed writes payout.confirmed; failed and withheld write payout.failed (lib/events).
  Includes lib/keys, lib/numbers, lib/events.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  payoutId: payout id
  ARGV[2]  step: step: signed | bumped | withheld | included | dropped | confirmed | failed
  ARGV[3]  wallet: the payout wallet, lower case (names the lock)
  ARGV[4]  token: the fencing token the lock must hold
  ARGV[5..] signed: from, nonce, txHash, rawTx, signedBlock; bumped: txHash, rawTx;
            withheld: error; included: txHash, blockNumber; confirmed: blockNumber;
            failed: error; dropped: txHash

  Returns {1} moved, {0} already so, or
    {-1}         unknown payout
    {-2, state}  not a legal step from its state
    {-3}         the lock is not held with this token
    {-4}         signed or withheld: the supplier is (signed) or is not (withheld) suspended
    {-5}         the payout is (or would be) signed by another wallet than the lock's
]]

local id, step = ARGV[1], ARGV[2]
if rcall('GET', k_payout_lock(ARGV[3])) ~= ARGV[4] then return { -3 } end
local payout = k_payout(id)
local p = rcall('HMGET', payout, 'state', 'txHash', 'amount', 'supplierId', 'blockNumber', 'hashes', 'from')
local state, tx = p[1], p[2]
if not state then return { -1 } end
local signer = (step == 'signed' and ARGV[5]) or (tx and p[7])
if signer and string.lower(signer) ~= ARGV[3] then return { -5 } end
local now = s(now_ms())
local supplier = k_supplier(p[4])
local suspended = rcall('HGET', supplier, 'status') == 'suspended'

-- Whether the payout signed this hash (a payout signed before hashes were kept has its txHash).
local function signed_hash(hash)
  local hashes = p[6] or tx
  if not hashes then return false end
  return string.find(',' .. hashes .. ',', ',' .. hash .. ',', 1, true) ~= nil
end

if step == 'signed' then
  if tx then
    if state ~= 'failed' and signed_hash(ARGV[7]) then return { 0 } end
    return { -2, state }
  end
  if state ~= 'sending' then return { -2, state } end
  if suspended then return { -4 } end
  rcall('HSET', payout, 'from', ARGV[5], 'nonce', ARGV[6], 'txHash', ARGV[7], 'rawTx', ARGV[8],
    'signedBlock', ARGV[9], 'hashes', ARGV[7], 'updatedAt', now)
  local next_nonce = k_payout_next_nonce(ARGV[3])
  if int(rcall('GET', next_nonce)) <= int(ARGV[6]) then rcall('SET', next_nonce, s(int(ARGV[6]) + 1)) end
  return { 1 }
end

if step == 'bumped' then
  if not tx or state ~= 'sending' then return { -2, state } end
  if signed_hash(ARGV[5]) then return { 0 } end
  rcall('HSET', payout, 'txHash', ARGV[5], 'rawTx', ARGV[6], 'hashes', (p[6] or tx) .. ',' .. ARGV[5],
    'updatedAt', now)
  return { 1 }
end

if step == 'included' then
  -- pending: a reorg mined it again, in another block or as another of its hashes (one nonce)
  if state == 'pending' and signed_hash(ARGV[5]) then
    if tx == ARGV[5] and p[5] == ARGV[6] then return { 0 } end
    rcall('HSET', payout, 'txHash', ARGV[5], 'blockNumber', ARGV[6], 'updatedAt', now)
    return { 1 }
  end
  if state ~= 'sending' or not signed_hash(ARGV[5]) then return { -2, state } end
  rcall('HSET', payout, 'state', 'pending', 'txHash', ARGV[5], 'blockNumber', ARGV[6], 'updatedAt', now)
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

-- Withheld or failed: the payout ends unpaid, its amount payable again, once.
local function fail_payout()
  rcall('HSET', payout, 'state', 'failed', 'error', ARGV[5], 'updatedAt', now)
  rcall('HINCRBY', supplier, 'pending', s(-amount))
  rcall('ZREM', K_PAYOUTS_OPEN, id)
  emit_event('supplier:' .. p[4], 'payout.failed', now, { payoutId = id, amountUsdc = usdc(amount), error = ARGV[5] })
  return { 1 }
end

if step == 'withheld' then
  if state == 'failed' and not tx then return { 0 } end
  if state ~= 'sending' or tx then return { -2, state } end
  if not suspended then return { -4 } end
  return fail_payout()
end

if step == 'confirmed' then
  if state == 'confirmed' then return { 0 } end
  if state ~= 'pending' then return { -2, state } end
  rcall('HSET', payout, 'state', 'confirmed', 'blockNumber', ARGV[5], 'updatedAt', now)
  rcall('HINCRBY', supplier, 'pending', s(-amount))
  rcall('HINCRBY', supplier, 'paidOut', s(amount))
  rcall('ZREM', K_PAYOUTS_OPEN, id)
  emit_event('supplier:' .. p[4], 'payout.confirmed', now,
    { payoutId = id, amountUsdc = usdc(amount), txHash = tx, blockNumber = ARGV[5] })
  return { 1 }
end

if step == 'failed' then
  if state == 'failed' then return { 0 } end
  if state ~= 'sending' and state ~= 'pending' then return { -2, state } end
  return fail_payout()
end
return { -2, state }
