--[[
  webhook-state: an endpoint's record replaced by one the caller made from it (disabled after a
  410 Gone, or by its owner; enabled again by its owner; its signing secret rotated), only while
  the record is still the one the caller read: a removal or another change meanwhile is not undone.

  KEYS[1]  endpoints hash            (<owner>:webhooks, endpoint id -> JSON)
  ARGV[1]  endpointId: endpoint id
  ARGV[2]  expected: the endpoint JSON as the caller read it
  ARGV[3]  endpoint: the endpoint JSON to write

  Returns { 1 } written, { 0 } no such endpoint, or { -1 } changed since it was read (nothing written).
]]
local rcall = redis.call

local json = rcall('HGET', KEYS[1], ARGV[1])
if not json then return { 0 } end
if json ~= ARGV[2] then return { -1 } end
rcall('HSET', KEYS[1], ARGV[1], ARGV[3])
return { 1 }
