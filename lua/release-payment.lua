--[[
  release-payment: let go of a claim that can move no money, so it leaves the payments in flight.
  Compare-and-release: only a claim still as the caller read it (the same transaction, or none) is
  released, so a claim marked sent meanwhile by the request settling it is never dropped. A
  credited or taken-back authorization is never released: its record is what refuses the
  authorization's money a second time.
  A claim whose request sent nothing (refused before settling) is dropped: the payer may present
  the same authorization again. One the reconciler lets go (ARGV[3]: `expired`, unused past its
  validBefore; `canceled`, by the payer, on chain) may have been sent, and a replica may still hold
  a receipt of it from a fork a reorg lost: its record stays, marked so, and a credit from that
  receipt (lua/credit-payment.lua) or a replay (lua/claim-payment.lua) finds it and moves nothing.
  Kept the record retention past the later of now and its validBefore, not for ever as a credited
  one is: once no block can use it, only a receipt held that long could credit it, and a credit of
  a transaction the chain does not hold is taken back by the confirmations watcher in any case.

  KEYS[1]  authorization hash       (x402:auth:<authorizationId>)
  KEYS[2]  payments-in-flight zset
  ARGV[1]  authorizationId: authorization id
  ARGV[2]  transaction: the claim's transaction hash as the caller read it ("" for none)
  ARGV[3]  mark: "" to drop the record (nothing was sent), or `expired` or `canceled` to keep it so
  ARGV[4]  recordRetentionMs: how long a marked record is kept past its validBefore, ms, positive

  Returns  1 released
           0 nothing to release (unknown, credited, taken back, released, or changed since it was read)
  Times come from Redis TIME, in milliseconds.
]]
local rcall = redis.call

local mark = ARGV[3] or ''
if mark ~= '' and mark ~= 'expired' and mark ~= 'canceled' then error('the mark must be empty, expired or canceled') end
if not string.match(ARGV[4] or '', '^[1-9]%d*$') then error('the record retention, ms, is required') end

local record = rcall('HMGET', KEYS[1], 'state', 'tx', 'validBefore')
if record[1] ~= 'claimed' and record[1] ~= 'sent' then return 0 end
if (record[2] or '') ~= (ARGV[2] or '') then return 0 end
rcall('ZREM', KEYS[2], ARGV[1])
if mark == '' then
  rcall('DEL', KEYS[1])
  return 1
end

local time = rcall('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local validBefore = tonumber(record[3] or '') or 0
local from = math.max(now, validBefore * 1000)
rcall('HSET', KEYS[1], 'state', mark, 'releasedAt', string.format('%d', now))
rcall('PEXPIREAT', KEYS[1], string.format('%d', from + tonumber(ARGV[4])))
return 1
