--[[
  catalog-replace: swap the whole model catalog in one step, so a reader never sees half a sync.

  KEYS[1]  catalog hash (model id -> entry JSON)
  KEYS[2]  catalog meta hash
  ARGV[1]  syncedAt: synced-at, milliseconds
  ARGV[2]  sourceUrl: source URL (informational)
  ARGV[3]  ticket: the sync's ticket (taken before it asked the upstream), or '' for none
  ARGV[4..] id, entry JSON, id, entry JSON, ...

  A sync whose ticket is not above the last one written asked the upstream before the list that
  is there was asked for: its older list is not written, and -1 is returned.
  Returns the number of entries written.
]]
local rcall = redis.call

local ticket = tonumber(ARGV[3])
if ticket then
  local written = tonumber(rcall('HGET', KEYS[2], 'ticketWritten') or '0')
  if ticket <= written then return -1 end
  rcall('HSET', KEYS[2], 'ticketWritten', ARGV[3])
end
rcall('DEL', KEYS[1])
local count = 0
for i = 4, #ARGV, 2 do
  rcall('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  count = count + 1
end
rcall('HSET', KEYS[2], 'syncedAt', ARGV[1], 'source', ARGV[2], 'count', count)
return count
