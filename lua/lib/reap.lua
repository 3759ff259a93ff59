-- lib/reap: ends attempts whose lease expired (their replica stopped renewing): everything they
-- held goes back, and the attempt is marked reaped so a late clear can still be settled honestly.
-- Each reaped attempt goes onto the attempts:ended stream (lib/attempts record_ended).
local function reap_expired(now, limit)
  local expired = rcall('ZRANGEBYSCORE', K_LEASES, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(expired) do
    local a = read_attempt(id)
    if a and a.state == 'admitted' then
      unwind_attempt(a, 0)
      rcall('HSET', k_attempt(id), 'state', 'reaped', 'endedAt', s(now))
      record_ended(id)
    else
      rcall('ZREM', K_LEASES, id)
    end
  end
  return #expired
end
