--[[
  take-back-payment: take back a pending payment whose transaction the chain no longer holds and
  whose authorization no transaction used before it expired: no money moved, so pending and funded
  shrink by its amount together (funded = confirmed + pending + held + spent still holds), and the
  payment's record goes. Its authorization's record stays, marked `taken back`, for as long as a
  credited one would be kept: a replica that read the transaction's receipt before the chain lost
  it and credits it only now (lua/credit-payment.lua), or a replay of the authorization
  (lua/claim-payment.lua), finds it there and moves nothing. Once per payment: one no longer
  pending has nothing to take back. The payment id keeps what was taken back and when (KEYS[4]) for
  the record retention, so whoever asks after its transaction is answered that it was reversed; no
  step that moves money reads it. In a market held apart the account is on another slot:
  lua/take-back-pending.lua takes its balance back first, idempotently by payment, and this step
  only drops the payment's record and marks its authorization's (KEYS[5..8] absent).

  KEYS[1]  payment hash             (x402:payment:<paymentId>)
  KEYS[2]  authorization hash       (x402:auth:<authorizationId>; kept, marked taken back)
  KEYS[3]  unconfirmed zset         (payment id -> block number)
  KEYS[4]  reversed hash            (x402:reversed:<paymentId>: amount, at)
  KEYS[5]  account hash             (acct:<accountId>)                          } absent when
  KEYS[6]  the account's webhook hooks hash    (acct:<accountId>:hooks)          } held apart
  KEYS[7]  the account's webhook event stream  (acct:<accountId>:events)       }
  KEYS[8]  the owners flagged for delivery     (webhooks:due)                   }
  ARGV[1]  paymentId: payment id
  ARGV[2]  accountId: account id               (must be the payment's)
  ARGV[3]  recordRetentionMs: how long the reversed hash is kept, ms, positive

  Returns  { 1, pending, funded }   taken back; balances after, integer micro-USDC strings ({ 1 }
                                    held apart: the records dropped)
           { 0 }                    nothing to do (unknown, or no longer pending); dropped from the zset
           { -1 }                   the account is not the payment's, or the authorization is not
                                    credited by this payment
           { -7 }                   pending is below the amount (never driven negative; left for the audit)
  Times come from Redis TIME, in milliseconds. A take-back writes funding.reversed to the account's
  event stream in the same call when one of its endpoints subscribes, and flags the account for
  the delivery consumers (as lib/events).
]]
local rcall = redis.call

if not string.match(ARGV[3] or '', '^[1-9]%d*$') then error('the record retention, ms, is required') end

local p = rcall('HMGET', KEYS[1], 'state', 'accountId', 'amount', 'authorization')
if p[1] ~= 'pending' then
  rcall('ZREM', KEYS[3], ARGV[1])
  return { 0 }
end
local account = KEYS[5]
if p[2] ~= ARGV[2] or (account and rcall('HGET', account, 'id') ~= ARGV[2]) then return { -1 } end
local auth = rcall('HMGET', KEYS[2], 'id', 'state', 'paymentId')
if auth[1] ~= p[4] or auth[2] ~= 'credited' or auth[3] ~= ARGV[1] then return { -1 } end
local amount = p[3]
if account and tonumber(rcall('HGET', account, 'pending') or '0') < tonumber(amount) then return { -7 } end

local time = rcall('TIME')
local now = time[1] .. string.format('%03d', math.floor(tonumber(time[2]) / 1000))
rcall('DEL', KEYS[1])
rcall('HSET', KEYS[2], 'state', 'taken back', 'takenBackAt', now)
rcall('ZREM', KEYS[3], ARGV[1])
rcall('HSET', KEYS[4], 'amount', amount, 'at', now)
rcall('PEXPIRE', KEYS[4], ARGV[3])
if not account then return { 1 } end
rcall('HINCRBY', account, 'pending', '-' .. amount)
rcall('HINCRBY', account, 'funded', '-' .. amount)
local b = rcall('HMGET', account, 'pending', 'funded')
if rcall('HGET', KEYS[6], 't:funding.reversed') then
  local function usdc(micros)
    micros = tonumber(micros)
    return string.format('%d.%06d', math.floor(micros / 1000000), micros % 1000000)
  end
  rcall('XADD', KEYS[7], 'MAXLEN', '~', 10000, '*', 'type', 'funding.reversed', 'at', now, 'data',
    cjson.encode({ paymentId = ARGV[1], amountUsdc = usdc(amount), pendingUsdc = usdc(b[1]) }))
  rcall('SADD', KEYS[8], 'acct:' .. ARGV[2])
end
return { 1, b[1], b[2] }
