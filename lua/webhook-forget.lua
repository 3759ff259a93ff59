--[[
  webhook-forget: drops the consumers a stopped replica left in an owner's delivery group: each one
  with no entry pending, idle longer than ARGV[2], other than the caller's own. The pending count
  is read in the same call as the drop, so no entry is ever dropped with its consumer (XGROUP
  DELCONSUMER forgets the consumer's pending entries): one read meanwhile keeps its consumer, and
  one pending on a stopped replica keeps it until another replica claims it. A live replica's
  consumer dropped while it holds nothing is made again by its next read.

  KEYS[1]  event stream              (<owner>:events)
  ARGV[1]  group: the group the replicas read with
  ARGV[2]  idleMs: how long (ms) a consumer has been idle before it is dropped
  ARGV[3]  keep: the caller's own consumer name, never dropped

  Returns the number of consumers dropped (0 where the stream or its group is not there).
]]
local rcall = redis.call

if rcall('EXISTS', KEYS[1]) == 0 then return 0 end
local consumers = redis.pcall('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if consumers.err then return 0 end
local idle_ms = tonumber(ARGV[2])
local dropped = 0
for _, fields in ipairs(consumers) do
  local info = {}
  for i = 1, #fields, 2 do info[fields[i]] = fields[i + 1] end
  if info.name ~= ARGV[3] and info.pending == 0 and info.idle > idle_ms then
    dropped = dropped + rcall('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], info.name)
  end
end
return dropped
