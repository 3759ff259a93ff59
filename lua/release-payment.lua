--[[
  release-payment: drop a claim whose settlement moved no money (verification failed, the send
  was refused, or the transaction reverted), so the payer may sign again. A credited
  authorization is never released.

  KEYS[1]  authorization hash       (x402:auth:<authorizationId>)
  KEYS[2]  payments-in-flight zset
  ARGV[1]  authorizationId: authorization id

  Returns  1 released
           0 nothing to release (unknown, or already credited)
]]
local rcall = redis.call

local state = rcall('HGET', KEYS[1], 'state')
if not state or state == 'credited' then return 0 end
rcall('DEL', KEYS[1])
rcall('ZREM', KEYS[2], ARGV[1])
return 1
