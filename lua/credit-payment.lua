--[[
  credit-payment: credit a settled x402 payment to an account's pending balance, exactly once.
  Idempotent twice over: by payment (chain id + transaction hash + authorization: one transaction
  may use several authorizations, each a payment) and by authorization (chain, token, payer, nonce), whichever replica, request or reconciler gets here first. Pending and
  funded grow together, which keeps funded = confirmed + pending + held + spent. In a market held
  apart the account is on another slot: this step records the payment alone (KEYS[6] absent), and
  lua/credit-pending.lua credits the account after, idempotently by payment; a replica that stops
  between the two leaves a recorded payment whose confirmation credits it first (src/funding/ledger.ts).

  KEYS[1]  payment hash             (x402:payment:<paymentId>)
  KEYS[2]  authorization hash       (x402:auth:<authorizationId>)
  KEYS[3]  payments-in-flight zset  (authorization ids not yet credited)
  KEYS[4]  unconfirmed zset         (payment id -> block number, for the confirmations watcher)
  KEYS[5]  the transaction's payments set (x402:tx:<chainId>:<txHash>: payment ids, for lookups)
  KEYS[6]  account hash             (acct:<accountId>); absent when held apart
  ARGV[1]  accountId: account id
  ARGV[2]  amount: amount, integer micro-USDC, positive
  ARGV[3]  paymentId: payment id               (<chainId>:<txHash>:<payer>:<nonce>, lower case)
  ARGV[4]  authorizationId: authorization id         (<chainId>:<token>:<payer>:<nonce>, lower case)
  ARGV[5]  blockNumber: block number that included the transfer
  ARGV[6]  payer: payer wallet, checksummed
  ARGV[7]  table: the value of the account's `table` field (src/redis/keys.ts ACCOUNT_TABLE), set
           if missing: an account made by a build that did not write it at creation becomes a hash
           table here, whose fields every request after finds by their hash (lua/create-account.lua)

  Returns  { 1, pending, funded }   credited; balances after, integer micro-USDC strings ({ 1 }
                                    when held apart: the payment recorded, the account not yet)
           { 0, paymentId }         already credited (this payment, or this authorization)
           { -9, paymentId }        the authorization's payment was taken back (lua/take-back-payment.lua):
                                    its transaction is no longer on chain and the authorization
                                    expired unused, so this credit's receipt is of a lost fork
           { -10, state }           the authorization's claim was released (lua/release-payment.lua),
                                    `expired` unused or `canceled` by the payer: no block can use it,
                                    so this credit's receipt is of a lost fork
           { -1 }                   no such account
           { -6 }                   the amount is not a positive integer
  Times come from Redis TIME, in milliseconds.
]]
local rcall = redis.call

local account = KEYS[6]
if account and rcall('HGET', account, 'id') ~= ARGV[1] then return { -1 } end
local amount = ARGV[2]
if not string.match(amount, '^[1-9]%d*$') or #amount > 15 then return { -6 } end

if rcall('EXISTS', KEYS[1]) == 1 then return { 0, ARGV[3] } end
local auth = rcall('HMGET', KEYS[2], 'state', 'paymentId')
if auth[1] == 'credited' then return { 0, auth[2] or '' } end
if auth[1] == 'taken back' then return { -9, auth[2] or '' } end
if auth[1] == 'expired' or auth[1] == 'canceled' then return { -10, auth[1] } end

local time = rcall('TIME')
local now = time[1] .. string.format('%03d', math.floor(tonumber(time[2]) / 1000))

rcall('HSET', KEYS[1],
  'id', ARGV[3], 'accountId', ARGV[1], 'amount', amount, 'state', 'pending',
  'blockNumber', ARGV[5], 'authorization', ARGV[4], 'payer', ARGV[6], 'creditedAt', now)
rcall('HSET', KEYS[2], 'id', ARGV[4], 'state', 'credited', 'paymentId', ARGV[3],
  'accountId', ARGV[1], 'payer', ARGV[6], 'amount', amount, 'creditedAt', now)
rcall('ZREM', KEYS[3], ARGV[4])
rcall('ZADD', KEYS[4], ARGV[5], ARGV[3])
rcall('SADD', KEYS[5], ARGV[3])
if not account then return { 1 } end
rcall('HSETNX', account, 'table', ARGV[7])
rcall('HINCRBY', account, 'pending', amount)
rcall('HINCRBY', account, 'funded', amount)
local b = rcall('HMGET', account, 'pending', 'funded')
return { 1, b[1], b[2] }
