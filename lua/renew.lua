--[[
  renew: push an in-flight attempt's lease deadline forward while its supplier call runs. Never
  pulls it back: a video job's lease (its time to live) is longer than a call's renewal.
  Includes lib/keys, lib/numbers.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  attemptId: attempt id
  ARGV[2]  leaseMs: lease length from now, ms

  Returns 1 renewed; 0 the lease is gone (reaped or ended).
]]
local deadline = now_ms() + int(ARGV[2])
local current = rcall('ZSCORE', K_LEASES, ARGV[1])
if current == false then return 0 end
if deadline > int(current) then rcall('ZADD', K_LEASES, 'XX', deadline, ARGV[1]) end
return 1
