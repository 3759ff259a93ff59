--[[
  note-payment: writes fields on a claim still in flight (its transaction hash, the block the
  search for its transfer starts from), only while the claim is there and not credited: a claim
  released meanwhile is not brought back half-made, nor a credited, taken-back or released record
  changed, and the caller learns it is gone.

  KEYS[1]  authorization hash       (x402:auth:<authorizationId>)
  ARGV[1..] field, value, field, value ... (an even count)

  Returns  1 written
           0 no claim in flight (unknown, credited, taken back or released): nothing written
]]
local rcall = redis.call

local state = rcall('HGET', KEYS[1], 'state')
if state ~= 'claimed' and state ~= 'sent' then return 0 end
rcall('HSET', KEYS[1], unpack(ARGV))
return 1
