--[[
  admit: pick the cheapest eligible offer for one request and hold everything it may use.
  Includes lib/keys, lib/numbers, lib/ladder, lib/offers, lib/record, lib/attempts, lib/reap, lib/pick,
  lib/holds (the account's side).

  KEYS[1]  keyspace base ("<prefix>:"); the script builds the documented names of lib/keys from it
  ARGV[1]  attemptId: attempt id (new, unique)
  ARGV[2]  accountId: account id
  ARGV[3]  apiKeyId: API key id (the buyer's key, for its in-flight cap)
  ARGV[4]  holdDiem: the hold, micro-DIEM: the request's worst case (prompt + max output at list price)
  ARGV[5]  keyCap: per-key in-flight cap
  ARGV[6]  accountCap: per-account in-flight cap (SVC_WALLET_MAX_IN_FLIGHT)
  ARGV[7]  leaseMs: lease length, ms
  ARGV[8]  tried: offer ids this request already tried, comma-separated ("" for none)
  ARGV[9]  defaultMaxPriceCents: default max price, cents (when the account has none set)
  ARGV[10] model: model id (kept on the attempt)
  ARGV[11] requestId: request id (kept on the attempt)
  ARGV[12] capGroup: cap group: an extra per-wallet in-flight count with its own cap ("" for none; "img" for
           images)
  ARGV[13] capGroupCap: the cap group's cap
  ARGV[14] apiKeyDigest: the API key's SHA-256 digest ("" when ARGV[2] and ARGV[3] are given): the key is then
           resolved here, in the same call as the admission (one round trip fewer per request),
           and its lastUsedAt written at most once a minute. A replica sends it for a key's first
           request, then names the key by ARGV[2] and ARGV[3] (src/market/key-owners.ts), which
           spares this call the key's record
  ARGV[15] recordRetentionMs: how long an attempt reaped here is kept as its request's record, ms (the default is SVC_RECORD_RETENTION_DAYS's, set by the caller)
  ARGV[16] now: the time now, ms ("" or absent: Redis TIME, as the gateway always sends): a test sets it
           to stand on either side of a budget period's boundary

  Every reply but {-11} ends with the account id and the API key id it was made for.

  Expired leases are left to the reaper loop, unless the request would be refused for something
  one may hold (an in-flight cap, the balance, the key's limit, an offer's capacity or cap): then
  at most 20 are reaped here and, if any was, the request is decided again.

  The offer whose last slot this takes leaves the ladder for the full set (lib/ladder) until a
  clear, release or reap gives a slot back; the offer this hold leaves with less than the market's
  minimum remaining (`minRoutable` on the market hash) leaves it for the dry set until what it holds
  comes back, or its capacity is raised.

  Returns {1, offerId, askCents, holdUsdc, holdDiem, leaseDeadline, confirmedAfter, upstreamBaseUrl,
    upstreamKeyEnc, upstreamBalance ("" unknown), upstreamGen (the offer's upstream generation, which
    the attempt's clear or release sends back: lua/offer-put.lua)} or
    {-1}                              unknown account
    {-2}                              per-key in-flight cap reached
    {-3}                              per-wallet in-flight cap (or its cap group's) reached
    {-4}                              pool empty: nothing posted at any price
    {-5, buyerMax, cheapestPosted, routableAboveMax}        no eligible supply (all above max)
    {-6, eligibleRoutable, maxEligibleOffer}                 offers at price lack capacity
    {-7}                              offers big enough exist, but all at their cap or cooling
    {-8}                              every offer big enough was already tried
    {-9, needed, confirmed, askCents} confirmed balance cannot cover the worst case at that ask
    {-10}                             attempt id already used
    {-11}                             no such API key (never minted, or revoked: by its ids, the
                                      account's revoked:<keyId>)
    {-12, limit, usedThroughKey, needed, askCents, confirmed, resetsAt}
                                      the key's spending limit: what it spent (in the current
                                      period, for a periodic budget) and holds now plus this hold
                                      would pass it; resetsAt: when the period ends, ms ("" for a
                                      lifetime limit)

  A key's limit, spent and held live on its account's hash (limit:<keyId>, spent:<keyId>,
  held:<keyId>), read in the one HMGET of the account below: a key without a limit costs admit no
  extra call. A limited key's budget period is read in one more: reset:<keyId> (daily, weekly or
  monthly; absent for a lifetime limit), and what it spent in its current period, pspent:<keyId>,
  counted from pstart:<keyId>. A period that moved on is rolled forward here, lazily: its spent
  starts again at 0. The attempt keeps the period it was admitted in (`period`), so a clear counts
  in that period's spent (lib/attempts count_in_period).
]]

local attempt_id = ARGV[1]
local hold_diem = int(ARGV[4])
local now = (ARGV[16] and ARGV[16] ~= '') and int(ARGV[16]) or now_ms()
local group = ARGV[12] or ''
keep_records_for(ARGV[15])
local tried = NONE_TRIED
if ARGV[8] ~= '' then
  tried = {}
  for id in string.gmatch(ARGV[8], '[^,]+') do tried[id] = true end
end

-- The request decided: the offer and the hold, or the refusal. If the refusal is one an expired
-- lease's hold may cause (an in-flight cap, an offer's capacity or cap, the balance, the key's
-- limit), expired leases are reaped and, if any was, the request decided again: nothing was
-- written yet. Else they are left to the reaper loop, off the request's path.
local chosen, hold, refusal
for round = 1, 2 do
  local max_cents
  max_cents, refusal = open_hold(attempt_id, ARGV[2], ARGV[3], ARGV[14] or '', int(ARGV[5]), int(ARGV[6]),
    group, int(ARGV[13]), now)
  if not refusal then
    if max_cents == 0 then max_cents = int(ARGV[9]) end
    chosen, refusal = pick_offer(max_cents, hold_diem, tried, now)
    if chosen then hold, refusal = check_hold(chosen.ask, hold_diem, now) end
  end
  if not refusal or round == 2 then break end
  local code = refusal[1]
  if not (code == -2 or code == -3 or code == -6 or code == -7 or code == -9 or code == -12) then break end
  if reap_expired(now, 20, K_LEASES) == 0 then break end
end
-- Whose request this was goes at the end of every reply, for the caller's records.
local reply = owned
if refusal then return reply(refusal) end

-- Each hash written once from what was read above (one call each on the hot path), the attempt
-- first: an id used before writes nothing.
local hold_s, hold_diem_s = s(hold), s(hold_diem)
if not write_attempt(attempt_id, chosen.id, chosen.ask, hold_s, hold_diem_s, ARGV[10], ARGV[11], now, ARGV[8], group) then
  return reply({ -10 })
end
local confirmed_s = write_hold(hold)
rcall('HSET', k_offer(chosen.id), 'held', s(chosen.held + hold_diem), 'inflight', s(chosen.inflight + 1))
-- Too little left for the market's minimum, or its last slot taken: off the ladder the next
-- requests walk, until what it holds comes back or a slot frees (lib/ladder).
if is_dry(chosen.capacity - chosen.burned - chosen.held - hold_diem) then
  shift(K_LADDER, K_DRY, chosen.id, chosen.capacity - chosen.burned)
elseif chosen.inflight + 1 >= chosen.max_in_flight then
  shift(K_LADDER, K_FULL, chosen.id, chosen.capacity - chosen.burned)
end
local deadline_s = s(now + lease_ms(ARGV[7]))
rcall('ZADD', K_LEASES, deadline_s, attempt_id)
-- The supplier call needs the upstream; returning it saves a round trip on the hot path.
local balance = chosen.balance == nil and '' or s(chosen.balance)
-- Whose request it was, as `reply` adds it, in the one table.
return { 1, chosen.id, chosen.ask, hold_s, hold_diem_s, deadline_s, confirmed_s, chosen.upstream_base_url,
  chosen.upstream_key_enc, balance, chosen.upstream_gen, H_account_id, H_key_id }
