--[[
  take-back-pending: the account's side of taking back a pending payment in a market held apart,
  before lua/take-back-payment.lua drops its records on the indexes' slot: pending and funded
  shrink by its amount, once per payment, and the account's payments hash keeps it as `taken back`,
  so a late credit of it (lua/credit-pending.lua) finds it there and credits nothing. A payment
  the account never listed (its credit's account step had not run) is kept as `taken back` alone.

  KEYS[1]  account hash             (acct:<accountId>)
  KEYS[2]  the account's payments hash (acct:<accountId>:payments)
  ARGV[1]  accountId: account id
  ARGV[2]  paymentId: payment id
  ARGV[3]  amount: amount, integer micro-USDC, as the payment's record says

  Returns  { 1 }   taken back
           { 0 }   taken back before
           { -1 }  no such account, or the payment is confirmed or moved on it
           { -7 }  pending is below the amount (never driven negative; left for the audit)
]]
local rcall = redis.call

if rcall('HGET', KEYS[1], 'id') ~= ARGV[1] then return { -1 } end
local state = rcall('HGET', KEYS[2], ARGV[2])
if state == 'taken back' then return { 0 } end
if state and state ~= 'pending' then return { -1 } end
local amount = ARGV[3]
if state == 'pending' and tonumber(rcall('HGET', KEYS[1], 'pending') or '0') < tonumber(amount) then
  return { -7 }
end
rcall('HSET', KEYS[2], ARGV[2], 'taken back')
if state ~= 'pending' then return { 1 } end
rcall('HINCRBY', KEYS[1], 'pending', '-' .. amount)
rcall('HINCRBY', KEYS[1], 'funded', '-' .. amount)
return { 1 }
