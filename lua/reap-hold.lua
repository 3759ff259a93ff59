--[[
  reap-hold: the account's side of reaping a reservation whose lease ran out (its replica stopped
  renewing): an attempt still admitted is reaped (its hold goes back, as lib/reap does); one that
  was cleared tells the reaper what to post on the offer, so a replica that died between the two
  steps of a clear leaves nothing half done. Idempotent.
  Includes lib/keys, lib/numbers, lib/ladder, lib/record, lib/attempts.

  KEYS[1]  the account's keyspace base
  ARGV[1]  attemptId: attempt id
  ARGV[2]  recordRetentionMs: how long a reaped attempt is kept as the request's record, ms
  ARGV[3]  offerId: the offer whose reservation ran out ("" or absent: not checked). One attempt id
           may have reservations on more than one offer (a reservation whose reply was lost, the
           request then reserved and held on the next offer under the same id): the account's
           attempt is this reservation's only when it names this offer; else it is another's,
           live or ended there, and this one is voided with nothing reaped or posted.

  Returns {1} reaped here (void the reservation); {2, burn, earned, fee, disputed, model, askCents,
  clearedAt (ms)} cleared (post it with these); {0} released or reaped already, or never held (void it).
]]
local a = read_attempt(ARGV[1])
if not a then return { 0 } end
if ARGV[3] and ARGV[3] ~= '' and a.offerId ~= ARGV[3] then return { 0 } end
if a.state == 'cleared' then
  local c = read_cleared(a)
  local charged, fee = int(c[1]), int(c[6])
  return { 2, c[3], s(charged - fee), s(fee), c[5] or '0', a.model or '', a.askCents, c[7] or '' }
end
if a.state ~= 'admitted' then return { 0 } end
keep_records_for(ARGV[2])
local now = now_ms()
unwind_hold(a, 0)
end_attempt(a, pack_end({ state = 'reaped', endedAt = s(now) }), now, 'expired', '0', '', '', '')
return { 1 }
