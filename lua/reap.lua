--[[
  reap: return what expired leases hold (their replica died or stopped renewing). Safe to run on
  every replica at once: each attempt is ended once.
  Includes lib/keys, lib/numbers, lib/offers, lib/attempts, lib/reap.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  the most leases to reap in this call

  Returns the number of leases reaped.
]]
return reap_expired(now_ms(), int(ARGV[1]))
