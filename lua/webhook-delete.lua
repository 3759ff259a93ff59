--[[
  webhook-delete: an owner removes one of its webhook endpoints: its record, its event types'
  counts in the hooks hash (a type no endpoint subscribes to any more is no longer written), its
  threshold, its delivery log and tries (else every endpoint ever made leaves them behind), and the
  owner from the consumers' list once it has none left.

  KEYS[1]  endpoints hash            (<owner>:webhooks)
  KEYS[2]  hooks hash                (<owner>:hooks)
  KEYS[3]  the owner's hash          (acct:<id> | supplier:<id>): its hooks field counts its
           endpoints (lua/webhook-put.lua)
  KEYS[4]  delivery log              (<owner>:webhook:<id>:log)
  KEYS[5]  tries hash                (<owner>:webhook:<id>:tries)
  KEYS[6]  owners set                (webhooks:owners); absent in a market held apart, where the
           owner stays listed (its consumer reads an empty stream) rather than race a new endpoint
  ARGV[1]  endpointId: endpoint id
  ARGV[2]  owner: owner                     (acct:<id> | supplier:<id>)

  Returns { 1 } removed, or { 0 } no such endpoint of this owner.
]]
local rcall = redis.call

local json = rcall('HGET', KEYS[1], ARGV[1])
if not json then return { 0 } end
for _, type in ipairs(cjson.decode(json).events) do
  if rcall('HINCRBY', KEYS[2], 't:' .. type, -1) <= 0 then rcall('HDEL', KEYS[2], 't:' .. type) end
end
rcall('HDEL', KEYS[2], 'low:' .. ARGV[1])
rcall('HDEL', KEYS[1], ARGV[1])
rcall('DEL', KEYS[4], KEYS[5])
local left = rcall('HLEN', KEYS[1])
if rcall('EXISTS', KEYS[3]) == 1 then rcall('HSET', KEYS[3], 'hooks', left) end
if KEYS[6] and left == 0 then rcall('SREM', KEYS[6], ARGV[2]) end
return { 1 }
