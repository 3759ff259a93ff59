--[[
  reap: return what expired leases hold (their replica died or stopped renewing). Safe to run on
  every replica at once: each attempt is ended once. Then the full set is swept: an offer there
  with room (a slot given back by a build that does not know the full set, during a rolling
  deploy) goes back to the ladder, so it does not wait there while requests pay a dearer offer;
  and a page of the dry set is read: an offer dry only by a minimum since lowered stands where
  its row says (lib/ladder sweep_dry); and, after a replica of this build started, a page of the
  ladder and of the first capacity tier: each offer stands in the tiers its row says, and once the
  ladder is read through the tiers are walked again; none is read, and the tiers are not walked,
  while a replica of a build that keeps no tiers is seen (lib/ladder sweep_tiers).
  Includes lib/keys, lib/numbers, lib/ladder, lib/record, lib/attempts, lib/reap.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  limit: the most leases to reap in this call
  ARGV[2]  recordRetentionMs: how long a reaped attempt is kept as the request's record, ms (the default is SVC_RECORD_RETENTION_DAYS's, set by the caller)
  ARGV[3]  tierless: '1' while a replica of a build that keeps no capacity tiers is seen (src/market/replicas.ts), else '0'

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
  local o = rcall('HMGET', k_offer(id), 'inflight', 'maxInFlight', 'capacity', 'burned')
  if o[2] and int(o[1]) < int(o[2]) then shift(K_FULL, K_LADDER, id, stored(o[3]) - stored(o[4])) end
end
sweep_dry(SWEEP)
sweep_tiers(SWEEP, ARGV[3] == '1')
return reaped
