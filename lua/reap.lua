--[[
  reap: return what expired leases hold (their replica died or stopped renewing). Safe to run on
  every replica at once: each attempt is ended once. Then the full set is swept: an offer there
  with room (a slot given back by a build that does not know the full set, during a rolling
  deploy) goes back to the ladder, so it does not wait there while requests pay a dearer offer;
  and a page of the dry set is read: an offer dry only by a minimum since lowered stands where
  its row says (lib/ladder sweep_dry).
  Includes lib/keys, lib/numbers, lib/ladder, lib/record, lib/attempts, lib/reap.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  limit: the most leases to reap in this call
  ARGV[2]  recordRetentionMs: how long a reaped attempt is kept as the request's record, ms (the default is SVC_RECORD_RETENTION_DAYS's, set by the caller)

  Returns the number of leases reaped.
]]
local SWEEP = 1000
keep_records_for(ARGV[2])
local now, limit = now_ms(), int(ARGV[1])
local reaped = reap_expired(now, limit, K_LEASES)
-- Then the leases of attempts admitted before the packing, while any is left (lib/keys).
if reaped < limit then reaped = reaped + reap_expired(now, limit - reaped, K_EARLIER_LEASES) end
-- At most SWEEP offers of each set a call, so that one call never holds Redis for long.
for _, id in ipairs(rcall('ZRANGE', K_FULL, 0, SWEEP - 1)) do
  local o = rcall('HMGET', k_offer(id), 'inflight', 'maxInFlight')
  if o[2] and int(o[1]) < int(o[2]) then shift(K_FULL, K_LADDER, id) end
end
sweep_dry(SWEEP)
return reaped
