--[[
  reap: return what expired leases hold (their replica died or stopped renewing). Safe to run on
  every replica at once: each attempt is ended once.
  Includes lib/keys, lib/numbers, lib/attempts, lib/reap.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  the most leases to reap in this call
  ARGV[2]  how long a reaped attempt is kept as the request's record, ms (default 30 days)

  Returns the number of leases reaped.
]]
if ARGV[2] and ARGV[2] ~= '' then record_ttl_ms = int(ARGV[2]) end
return reap_expired(now_ms(), int(ARGV[1]))
