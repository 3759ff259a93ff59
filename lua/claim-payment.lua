--[[
  claim-payment: reserve one x402 authorization for this request before anything is sent on
  chain, so a replayed or raced X-PAYMENT is settled at most once. The record it writes is the
  "payment in flight" entry: the transaction hash is added to it the moment it is known, and the
  reconciler finishes any claim that a request could not.

  KEYS[1]  authorization hash       (x402:auth:<authorizationId>)
  KEYS[2]  payments-in-flight zset  (authorization id -> claim time, ms)
  ARGV[1]  authorizationId: authorization id         (<chainId>:<token>:<payer>:<nonce>, lower case)
  ARGV[2]  kind: kind                     (signup | refill | topup)
  ARGV[3]  accountId: account id               (empty when a signup's account does not exist yet)
  ARGV[4]  payer: payer wallet, checksummed
  ARGV[5]  amount: amount, integer micro-USDC, positive
  ARGV[6]  fromBlock: block number to search from for the transfer (empty: recorded later, before settling)
  ARGV[7]  validBefore: the authorization's validBefore, unix seconds: until the chain's time passes
           it, the authorization may still move money, so the claim is never released before

  Returns  { 1 }                    claimed by this call
           { 0, state, tx }         already claimed, sent, credited, taken back, or released as
                                    expired or canceled (tx may be empty)
           { -6 }                   the amount is not a positive integer
  Times come from Redis TIME, in milliseconds.
]]
local rcall = redis.call

if not string.match(ARGV[5], '^[1-9]%d*$') or #ARGV[5] > 15 then return { -6 } end

local existing = rcall('HMGET', KEYS[1], 'state', 'tx')
if existing[1] then return { 0, existing[1], existing[2] or '' } end

local time = rcall('TIME')
local now = time[1] .. string.format('%03d', math.floor(tonumber(time[2]) / 1000))

rcall('HSET', KEYS[1],
  'id', ARGV[1], 'state', 'claimed', 'kind', ARGV[2], 'accountId', ARGV[3], 'payer', ARGV[4],
  'amount', ARGV[5], 'fromBlock', ARGV[6], 'claimedAt', now, 'validBefore', ARGV[7] or '')
rcall('ZADD', KEYS[2], now, ARGV[1])
return { 1 }
