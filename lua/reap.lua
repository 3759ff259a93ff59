--[[
  reap: return what expired leases hold (their replica died or stopped renewing). Safe to run on
  every replica at once: each attempt is ended once.
  Includes lib/keys, lib/numbers, lib/ladder, lib/record, lib/attempts, lib/reap.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  limit: the most leases to reap in this call
  ARGV[2]  recordRetentionMs: how long a reaped attempt is kept as the request's record, ms (the default is SVC_RECORD_RETENTION_DAYS's, set by the caller)

  Returns the number of leases reaped.
]]
keep_records_for(ARGV[2])
local now, limit = now_ms(), int(ARGV[1])
local reaped = reap_expired(now, limit, K_LEASES)
-- Then the leases of attempts admitted before the packing, while any is left (lib/keys).
if reaped < limit then reaped = reaped + reap_expired(now, limit - reaped, K_EARLIER_LEASES) end
return reaped
