--[[
  release-payment: drop a claim whose authorization the chain shows can no longer move money
  (unused, and expired), so it leaves the payments in flight. Compare-and-delete: only a claim
  still as the caller read it (the same transaction, or none) is released, so a claim marked sent
  meanwhile by the request settling it is never dropped. A credited or taken-back authorization is
  never released: its record is what refuses the authorization's money a second time.

  KEYS[1]  authorization hash       (x402:auth:<authorizationId>)
  KEYS[2]  payments-in-flight zset
  ARGV[1]  authorizationId: authorization id
  ARGV[2]  transaction: the claim's transaction hash as the caller read it ("" for none)

  Returns  1 released
           0 nothing to release (unknown, credited, taken back, or changed since it was read)
]]
local rcall = redis.call

local record = rcall('HMGET', KEYS[1], 'state', 'tx')
if record[1] ~= 'claimed' and record[1] ~= 'sent' then return 0 end
if (record[2] or '') ~= (ARGV[2] or '') then return 0 end
rcall('DEL', KEYS[1])
rcall('ZREM', KEYS[2], ARGV[1])
return 1
