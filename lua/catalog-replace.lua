--[[
  catalog-replace: swap the whole model catalog in one step, so a reader never sees half a sync.

  KEYS[1]  catalog hash (model id -> entry JSON)
  KEYS[2]  catalog meta hash
  ARGV[1]  syncedAt: synced-at, milliseconds
  ARGV[2]  sourceUrl: source URL (informational)
  ARGV[3..] id, entry JSON, id, entry JSON, ...

  Returns the number of entries written.
]]
local rcall = redis.call

rcall('DEL', KEYS[1])
local count = 0
for i = 3, #ARGV, 2 do
  rcall('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  count = count + 1
end
rcall('HSET', KEYS[2], 'syncedAt', ARGV[1], 'source', ARGV[2], 'count', count)
return count
