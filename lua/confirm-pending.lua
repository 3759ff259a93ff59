--[[
  confirm-pending: the account's side of confirming a payment in a market held apart (before
  lua/confirm-payment.lua marks the payment on the indexes' slot): its amount moves from pending to
  confirmed, once per payment, and funding.confirmed is written to the account's event stream in
  the same call when one of its endpoints subscribes (as lib/events).

  KEYS[1]  account hash             (acct:<accountId>)
  KEYS[2]  the account's payments hash (acct:<accountId>:payments, payment id -> pending|confirmed)
  KEYS[3]  the account's webhook hooks hash    (acct:<accountId>:hooks, as lua/lib/events.lua)
  KEYS[4]  the account's webhook event stream  (acct:<accountId>:events)
  ARGV[1]  accountId: account id
  ARGV[2]  paymentId: payment id
  ARGV[3]  amount: amount, integer micro-USDC, as the payment's record says

  Returns  { 1, confirmed, pending } confirmed; balances after, integer micro-USDC strings
           { 0 }                     this payment was confirmed on the account already
           { -1 }                    no such account, or the payment was never credited to it
           { -7 }                    pending is below the amount (never driven negative; left for the audit)
  Times come from Redis TIME, in milliseconds.
]]
local rcall = redis.call

if rcall('HGET', KEYS[1], 'id') ~= ARGV[1] then return { -1 } end
local state = rcall('HGET', KEYS[2], ARGV[2])
if state == 'confirmed' then return { 0 } end
if state ~= 'pending' then return { -1 } end
local amount = ARGV[3]
if tonumber(rcall('HGET', KEYS[1], 'pending') or '0') < tonumber(amount) then return { -7 } end

rcall('HINCRBY', KEYS[1], 'pending', '-' .. amount)
rcall('HINCRBY', KEYS[1], 'confirmed', amount)
rcall('HSET', KEYS[2], ARGV[2], 'confirmed')
local b = rcall('HMGET', KEYS[1], 'confirmed', 'pending')
if rcall('HGET', KEYS[3], 't:funding.confirmed') then
  local time = rcall('TIME')
  local now = time[1] .. string.format('%03d', math.floor(tonumber(time[2]) / 1000))
  local function usdc(micros)
    micros = tonumber(micros)
    return string.format('%d.%06d', math.floor(micros / 1000000), micros % 1000000)
  end
  rcall('XADD', KEYS[4], 'MAXLEN', '~', 10000, '*', 'type', 'funding.confirmed', 'at', now, 'data',
    cjson.encode({ paymentId = ARGV[2], amountUsdc = usdc(amount), confirmedUsdc = usdc(b[1]) }))
end
return { 1, b[1], b[2] }
