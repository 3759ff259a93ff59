--[[
  confirm-payment: move one credited payment from pending to confirmed (spendable) once its block
  has enough confirmations. Every replica may run the watcher; the state check makes each payment
  move once. In a market held apart the account is on another slot: lua/confirm-pending.lua moves
  its balance first, idempotently by payment, and this step only marks the payment (KEYS[3..6]
  absent).

  KEYS[1]  payment hash             (x402:payment:<paymentId>)
  KEYS[2]  unconfirmed zset         (payment id -> block number)
  KEYS[3]  account hash             (acct:<accountId>)                          } absent when
  KEYS[4]  the account's webhook hooks hash    (acct:<accountId>:hooks)          } held apart
  KEYS[5]  the account's webhook event stream  (acct:<accountId>:events)       }
  KEYS[6]  the owners flagged for delivery     (webhooks:due)                   }
  ARGV[1]  paymentId: payment id
  ARGV[2]  accountId: account id               (must be the payment's)

  Returns  { 1, confirmed, pending } confirmed; balances after, integer micro-USDC strings ({ 1 }
                                     held apart: the payment marked)
           { 0 }                     nothing to do (unknown or already confirmed); dropped from the zset
           { -1 }                    the account is not the payment's
           { -7 }                    pending is below the amount (never driven negative; left for the audit)
  Times come from Redis TIME, in milliseconds. A confirmation writes funding.confirmed to the
  account's event stream in the same call when one of its endpoints subscribes, and flags the
  account for the delivery consumers (as lib/events).
]]
local rcall = redis.call

local p = rcall('HMGET', KEYS[1], 'state', 'accountId', 'amount')
if p[1] ~= 'pending' then
  rcall('ZREM', KEYS[2], ARGV[1])
  return { 0 }
end
local account = KEYS[3]
if p[2] ~= ARGV[2] or (account and rcall('HGET', account, 'id') ~= ARGV[2]) then return { -1 } end
local amount = p[3]
if account and tonumber(rcall('HGET', account, 'pending') or '0') < tonumber(amount) then return { -7 } end

local time = rcall('TIME')
local now = time[1] .. string.format('%03d', math.floor(tonumber(time[2]) / 1000))

rcall('HSET', KEYS[1], 'state', 'confirmed', 'confirmedAt', now)
rcall('ZREM', KEYS[2], ARGV[1])
if not account then return { 1 } end
rcall('HINCRBY', account, 'pending', '-' .. amount)
rcall('HINCRBY', account, 'confirmed', amount)
local b = rcall('HMGET', account, 'confirmed', 'pending')
if rcall('HGET', KEYS[4], 't:funding.confirmed') then
  local function usdc(micros)
    micros = tonumber(micros)
    return string.format('%d.%06d', math.floor(micros / 1000000), micros % 1000000)
  end
  rcall('XADD', KEYS[5], 'MAXLEN', '~', 10000, '*', 'type', 'funding.confirmed', 'at', now, 'data',
    cjson.encode({ paymentId = ARGV[1], amountUsdc = usdc(amount), confirmedUsdc = usdc(b[1]) }))
  rcall('SADD', KEYS[6], 'acct:' .. ARGV[2])
end
return { 1, b[1], b[2] }
