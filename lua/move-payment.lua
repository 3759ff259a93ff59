--[[
  move-payment: move a pending payment to the transaction that did use its authorization, once the
  chain no longer holds the one it was credited from (a reorg took it out, and the signed
  authorization was sent again by another: the payer's own relayer, another facilitator). The
  balance stays pending; the payment's record, the authorization's and the confirmations watcher's
  list follow the new transaction, whose block it confirms from. Once per move: a payment no longer
  pending has nothing to move, and a transaction backs one payment only. In a market held apart
  the account's list of its payments follows in a step of its own (lua/move-pending.lua), which
  the record's movedFrom names until it has run. The old id keeps the id it moved to (KEYS[5]) for
  the record retention, so whoever asks after the old transaction is answered with the payment it
  became; no step that moves money reads it (the authorization's record names the new payment).

  KEYS[1]  payment hash             (x402:payment:<paymentId>)
  KEYS[2]  the new payment hash     (x402:payment:<movedTo>)
  KEYS[3]  authorization hash       (x402:auth:<authorizationId>)
  KEYS[4]  unconfirmed zset         (payment id -> block number)
  KEYS[5]  moved-to string          (x402:moved:<paymentId>)
  KEYS[6]  the new transaction's payments set (x402:tx:<chainId>:<txHash>: payment ids, for lookups)
  ARGV[1]  paymentId: payment id               (<chainId>:<txHash>:<payer>:<nonce>, or <chainId>:<txHash>
                                               as recorded before; lower case)
  ARGV[2]  movedTo: the new payment id         (<chainId>:<txHash>:<payer>:<nonce>, lower case)
  ARGV[3]  blockNumber: block number that included the new transaction
  ARGV[4]  recordRetentionMs: how long the old id keeps the id it moved to, ms, positive

  Returns  { 1 }   moved
           { 0 }   nothing to do (unknown, or no longer pending); dropped from the zset
           { -1 }  the authorization is not credited by this payment
           { -8 }  the new transaction backs a payment already
  Times come from Redis TIME, in milliseconds.
]]
local rcall = redis.call

if not string.match(ARGV[4] or '', '^[1-9]%d*$') then error('the record retention, ms, is required') end

local p = rcall('HMGET', KEYS[1], 'state', 'authorization')
if p[1] ~= 'pending' then
  rcall('ZREM', KEYS[4], ARGV[1])
  return { 0 }
end
if rcall('EXISTS', KEYS[2]) == 1 then return { -8 } end
local auth = rcall('HMGET', KEYS[3], 'id', 'state', 'paymentId')
if auth[1] ~= p[2] or auth[2] ~= 'credited' or auth[3] ~= ARGV[1] then return { -1 } end

local time = rcall('TIME')
local now = time[1] .. string.format('%03d', math.floor(tonumber(time[2]) / 1000))

rcall('HSET', KEYS[2], unpack(rcall('HGETALL', KEYS[1])))
rcall('HSET', KEYS[2], 'id', ARGV[2], 'blockNumber', ARGV[3], 'movedFrom', ARGV[1], 'movedAt', now)
rcall('DEL', KEYS[1])
rcall('HSET', KEYS[3], 'paymentId', ARGV[2], 'tx', string.match(ARGV[2], '^[^:]*:([^:]*)'))
rcall('ZREM', KEYS[4], ARGV[1])
rcall('ZADD', KEYS[4], ARGV[3], ARGV[2])
rcall('SET', KEYS[5], ARGV[2], 'PX', ARGV[4])
rcall('SADD', KEYS[6], ARGV[2])
return { 1 }
