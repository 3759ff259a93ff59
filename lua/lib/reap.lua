-- lib/reap: ends attempts whose lease expired (their replica stopped renewing): everything they
-- held goes back, and the attempt is marked reaped so a late clear can still be charged honestly.
-- A reaped attempt is kept as its request's record (lib/attempts end_attempt). leases: the zset
-- to reap (lib/keys: K_LEASES, or K_EARLIER_LEASES for attempts from before the packing).
local function reap_expired(now, limit, leases)
  local expired = rcall('ZRANGEBYSCORE', leases, '-inf', stamp(now), 'LIMIT', '0', s(limit))
  for _, id in ipairs(expired) do
    local a = read_attempt(id)
    if a and a.state == 'admitted' then
      unwind_attempt(a, 0)
      end_attempt(a, pack_end({ state = 'reaped', endedAt = stamp(now) }), now, 'expired', '0', '', '', '')
    else
      rcall('ZREM', leases, id)
    end
  end
  return #expired
end
