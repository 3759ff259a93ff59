--[[
  take-back-payment: take back a pending payment whose transaction the chain no longer holds and
  whose authorization no transaction used before it expired: no money moved, so pending and funded
  shrink by its amount together (funded = confirmed + pending + held + spent still holds), and the
  payment's record and its authorization's go, as a released claim's does. Once per payment: one
  no longer pending has nothing to take back. In a market held apart the account is on another
  slot: lua/take-back-pending.lua takes its balance back first, idempotently by payment, and this
  step only drops the records (KEYS[4] absent).

  KEYS[1]  payment hash             (x402:payment:<paymentId>)
  KEYS[2]  authorization hash       (x402:auth:<authorizationId>)
  KEYS[3]  unconfirmed zset         (payment id -> block number)
  KEYS[4]  account hash             (acct:<accountId>); absent when held apart
  ARGV[1]  paymentId: payment id
  ARGV[2]  accountId: account id               (must be the payment's)

  Returns  { 1, pending, funded }   taken back; balances after, integer micro-USDC strings ({ 1 }
                                    held apart: the records dropped)
           { 0 }                    nothing to do (unknown, or no longer pending); dropped from the zset
           { -1 }                   the account is not the payment's, or the authorization is not
                                    credited by this payment
           { -7 }                   pending is below the amount (never driven negative; left for the audit)
]]
local rcall = redis.call

local p = rcall('HMGET', KEYS[1], 'state', 'accountId', 'amount', 'authorization')
if p[1] ~= 'pending' then
  rcall('ZREM', KEYS[3], ARGV[1])
  return { 0 }
end
local account = KEYS[4]
if p[2] ~= ARGV[2] or (account and rcall('HGET', account, 'id') ~= ARGV[2]) then return { -1 } end
local auth = rcall('HMGET', KEYS[2], 'id', 'state', 'paymentId')
if auth[1] ~= p[4] or auth[2] ~= 'credited' or auth[3] ~= ARGV[1] then return { -1 } end
local amount = p[3]
if account and tonumber(rcall('HGET', account, 'pending') or '0') < tonumber(amount) then return { -7 } end

rcall('DEL', KEYS[1], KEYS[2])
rcall('ZREM', KEYS[3], ARGV[1])
if not account then return { 1 } end
rcall('HINCRBY', account, 'pending', '-' .. amount)
rcall('HINCRBY', account, 'funded', '-' .. amount)
local b = rcall('HMGET', account, 'pending', 'funded')
return { 1, b[1], b[2] }
