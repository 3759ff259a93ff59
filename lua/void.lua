--[[
  void: end a reservation that will not be cleared (its hold was refused, the request failed, or
  its attempt was reaped): the capacity and the slot go back to the offer. The ended reservation is
  kept as long as its attempt's record, for a replayed step and the audit, then expires. Optionally cools the
  offer down and records the supplier key's balance, as release does. Idempotent: a reservation
  already posted or voided is left as it is.
  Includes lib/keys, lib/numbers, lib/ladder, lib/record, lib/attempts.

  KEYS[1]  the offer's keyspace base
  ARGV[1]  attemptId: attempt id
  ARGV[2]  cooldownMs: cool-down of the offer, ms (0 for none)
  ARGV[3]  upstreamBalance: the supplier key's upstream balance, micro-DIEM ("" unknown): recorded with
           ARGV[6], unless that day is over (the allocation resets at 00:00 UTC)
  ARGV[4]  recordRetentionMs: how long the ended reservation is kept (as its attempt's record is), ms
  ARGV[5]  watchMs: the reaper's ("" or absent: 0): a reservation voided here stays on the offer's
           leases this long, ms (renewals push it on), for the reaper to look at again: a late clear
           may still charge its account, and its post be lost (src/market/two-phase.ts reapOffer)

  ARGV[6]  balanceDay: the UTC day the balance holds on, as lua/release.lua answered it ("" or absent:
           not known, and the balance is not recorded)
  ARGV[7]  upstreamGen: the offer's upstream generation, as the reservation answered it ("" or absent:
           not known): the balance is recorded only when the offer's upstream is still that one
           (lua/offer-put.lua)

  Returns {1} voided; {0} already ended (its watch, if any, over); {-1} no such reservation.
]]
local reservation = k_reservation(ARGV[1])
local r = rcall('HMGET', reservation, 'state', 'offerId', 'holdDiem')
if not r[1] then
  -- Expired while the reaper watched it (kept no longer than its record): nothing to look at.
  rcall('ZREM', K_LEASES, ARGV[1])
  return { -1 }
end
local offer = k_offer(r[2])
local cooldown = int(ARGV[2])
if cooldown > 0 and rcall('EXISTS', offer) == 1 then rcall('HSET', offer, 'cooldownUntil', s(now_ms() + cooldown)) end
local balance_day = ARGV[6] or ''
if ARGV[3] ~= '' and balance_day ~= '' and int(balance_day) >= day_of(now_ms()) then
  local g = rcall('HMGET', offer, 'id', 'upstreamGen')
  if g[1] and (g[2] or '0') == (ARGV[7] or '') then rcall('HSET', offer, 'balance', ARGV[3], 'balanceDay', balance_day) end
end
if r[1] ~= 'reserved' then
  rcall('ZREM', K_LEASES, ARGV[1])
  return { 0 }
end
unwind_reservation(r[2], r[3])
rcall('HSET', reservation, 'state', 'voided')
rcall('PEXPIRE', reservation, s(int(ARGV[4])))
local watch = int(ARGV[5])
if watch > 0 then
  rcall('ZADD', K_LEASES, s(now_ms() + watch), ARGV[1])
else
  rcall('ZREM', K_LEASES, ARGV[1])
end
return { 1 }
