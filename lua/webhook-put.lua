--[[
  webhook-put: an owner (an account or a supplier) registers a webhook endpoint, at most ARGV[3]
  of them. Records the endpoint, counts its event types in the hooks hash the event-writing scripts
  read (lua/lib/events.lua), creates the owner's event stream and its delivery group, and lists
  the owner for the replicas' consumers. The id is fresh per call: a retry registers another.

  KEYS[1]  endpoints hash            (<owner>:webhooks, endpoint id -> JSON)
  KEYS[2]  hooks hash                (<owner>:hooks)
  KEYS[3]  event stream              (<owner>:events)
  KEYS[4]  the owner's hash          (acct:<id> | supplier:<id>): its hooks field counts its
           endpoints, so a clear reads there (one field of a hash it reads anyway) whether it
           need look in the hooks hash at all
  KEYS[5]  owners set                (webhooks:owners); absent in a market held apart, where an
           account's keys are on another slot and the caller lists the owner first
  ARGV[1]  endpointId: endpoint id
  ARGV[2]  endpoint: endpoint JSON
  ARGV[3]  maxEndpoints: most endpoints per owner
  ARGV[4]  owner: owner                     (acct:<id> | supplier:<id>)
  ARGV[5]  balanceThreshold: balance threshold, integer micro-USDC, or '' for none
  ARGV[6]  group: group name the replicas read with
  ARGV[7..] event types the endpoint subscribes to (variadic)

  Returns { 1 } registered, or { -1 } the owner has the most endpoints already (nothing written).
]]
local rcall = redis.call

if rcall('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return { -1 } end
rcall('HSET', KEYS[1], ARGV[1], ARGV[2])
for i = 7, #ARGV do rcall('HINCRBY', KEYS[2], 't:' .. ARGV[i], 1) end
if ARGV[5] ~= '' then rcall('HSET', KEYS[2], 'low:' .. ARGV[1], ARGV[5]) end
-- The group reads from the stream's start: the first event ever written is delivered too. A
-- second endpoint finds the group there already (BUSYGROUP, ignored).
pcall(rcall, 'XGROUP', 'CREATE', KEYS[3], ARGV[6], '0', 'MKSTREAM')
if rcall('EXISTS', KEYS[4]) == 1 then rcall('HSET', KEYS[4], 'hooks', rcall('HLEN', KEYS[1])) end
if KEYS[5] then rcall('SADD', KEYS[5], ARGV[4]) end
return { 1 }
