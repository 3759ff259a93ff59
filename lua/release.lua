--[[
  release: end a failed attempt with no charge: the hold, the capacity and the slots all go back.
  Optionally cools the offer down (upstream errors) and records the supplier key's balance.
  The ended attempt is kept as the request's record (lib/attempts end_attempt).
  Includes lib/keys, lib/numbers, lib/ladder, lib/record, lib/attempts.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  attemptId: attempt id
  ARGV[2]  errorCode: error code (kept on the attempt)
  ARGV[3]  cooldownMs: cool-down of the offer, ms (0 for none)
  ARGV[4]  upstreamBalance: the supplier key's upstream balance, micro-DIEM ("" unknown): recorded with
           its UTC day (balanceDay), only when the attempt was admitted on the day of this release (its
           allocation resets at 00:00 UTC; the upstream answered in between)
  ARGV[5]  final: "1" when no other supplier will be tried for this request (kept as the attempt's
           `final`: its record is then complete), "0" when the request falls forward
  ARGV[6]  recordRetentionMs: how long the ended attempt is kept as the request's record, ms (the default is SVC_RECORD_RETENTION_DAYS's, set by the caller)
  ARGV[7]  offerApart: "1" when the offer's side lives apart (lua/reserve.lua): only the account's
           hold goes back here, and the caller voids the reservation (lua/void.lua), which also
           cools the offer down; "0": both sides here
  ARGV[8]  upstreamGen: the offer's upstream generation, as admit answered it ("" not known): ARGV[4]'s
           balance is recorded only when the offer's upstream is still the one the request was sent
           to (lua/offer-put.lua)
  ARGV[9]  endReaped: "1" when the request ends uncharged for good (a video job refunded or expired,
           its buyer told nothing was charged): an attempt the reaper ended (its hold back already,
           a late clear would still charge it) is then released here, its record saying so (ARGV[2],
           ARGV[5]; its end time kept), so that no later clear charges it; nothing moves. "0" (or
           absent): a reaped attempt is left as it is

  Returns {1, confirmedAfter, balanceDay} released; {0, balanceDay} already ended (nothing moved); {-1}
  unknown attempt. balanceDay: the UTC day ARGV[4]'s balance holds on (days since 1970-01-01; "" when not
  known), what the caller voids with when the offer lives apart.
]]

keep_records_for(ARGV[6])
local a = read_attempt(ARGV[1])
if not a then return { -1 } end
local now = now_ms()
local apart = ARGV[7] == '1'
local balance, balance_day = balance_known(ARGV[4], a.admittedAt, now)
if not apart then
  local offer = k_offer(a.offerId)
  local cooldown = int(ARGV[3])
  if cooldown > 0 and rcall('EXISTS', offer) == 1 then rcall('HSET', offer, 'cooldownUntil', s(now + cooldown)) end
  if balance ~= '' then
    -- Learned through an upstream the offer no longer has (or an offer gone by hand): not recorded.
    local g = rcall('HMGET', offer, 'id', 'upstreamGen')
    if g[1] and (g[2] or '0') == ARGV[8] then rcall('HSET', offer, 'balance', balance, 'balanceDay', balance_day) end
  end
end
if a.state ~= 'admitted' then
  if a.state == 'reaped' and ARGV[9] == '1' then
    local key, final = k_attempt(a.id), ARGV[5] == '1' and '1' or '0'
    if a.packed then
      local _, ended_at = string.match(a.e, END_HEAD)
      rcall('HSET', key, 'e', pack_end({ state = 'released', endedAt = ended_at, errorCode = ARGV[2], final = final }))
    else
      rcall('HSET', key, 'state', 'released', 'errorCode', ARGV[2], 'final', final)
    end
  end
  return { 0, balance_day or '' }
end

local _, confirmed_s
if apart then _, confirmed_s = unwind_hold(a, 0) else _, confirmed_s = unwind_attempt(a, 0) end
end_attempt(a, pack_end({ state = 'released', errorCode = ARGV[2], endedAt = s(now),
  final = ARGV[5] == '1' and '1' or '0' }), now, 'failed', '0', '', '', ARGV[2])
return { 1, confirmed_s, balance_day or '' }
