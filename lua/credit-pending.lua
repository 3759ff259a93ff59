--[[
  credit-pending: the account's side of crediting a settled payment in a market held apart, where
  lua/credit-payment.lua recorded the payment on the indexes' slot: pending and funded grow by its
  amount, once per payment (the account's payments hash remembers each), which keeps
  funded = confirmed + pending + held + spent.

  KEYS[1]  account hash             (acct:<accountId>)
  KEYS[2]  the account's payments hash (acct:<accountId>:payments, payment id -> pending|confirmed)
  ARGV[1]  accountId: account id
  ARGV[2]  paymentId: payment id (<chainId>:<txHash>, lower case)
  ARGV[3]  amount: amount, integer micro-USDC, positive
  ARGV[4]  table: the value of the account's `table` field (src/redis/keys.ts ACCOUNT_TABLE), set
           if missing: an account made by a build that did not write it at creation becomes a hash
           table here, whose fields every request after finds by their hash (lua/create-account.lua)

  Returns  { 1, pending, funded }   credited; balances after, integer micro-USDC strings
           { 0, paymentId }         this payment was credited to the account already
           { -1 }                   no such account
           { -6 }                   the amount is not a positive integer
]]
local rcall = redis.call

if rcall('HGET', KEYS[1], 'id') ~= ARGV[1] then return { -1 } end
local amount = ARGV[3]
if not string.match(amount, '^[1-9]%d*$') or #amount > 15 then return { -6 } end
if rcall('HSETNX', KEYS[2], ARGV[2], 'pending') == 0 then return { 0, ARGV[2] } end
rcall('HSETNX', KEYS[1], 'table', ARGV[4])
rcall('HINCRBY', KEYS[1], 'pending', amount)
rcall('HINCRBY', KEYS[1], 'funded', amount)
local b = rcall('HMGET', KEYS[1], 'pending', 'funded')
return { 1, b[1], b[2] }
