--[[
  renew: push an in-flight attempt's lease deadline forward while its bytes still flow.
  Includes lib/keys, lib/numbers.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  attempt id
  ARGV[2]  lease length from now, ms

  Returns 1 renewed; 0 the lease is gone (reaped or ended).
]]
local deadline = now_ms() + int(ARGV[2])
if rcall('ZSCORE', K_LEASES, ARGV[1]) == false then return 0 end
rcall('ZADD', K_LEASES, 'XX', deadline, ARGV[1])
return 1
