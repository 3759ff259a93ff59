--[[
  admit: pick the cheapest eligible offer for one request and hold everything it may use.
  Includes lib/keys, lib/numbers, lib/offers, lib/attempts, lib/reap, lib/pick.

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
           and its lastUsedAt written at most once a minute
  ARGV[15] recordRetentionMs: how long an attempt reaped here is kept as its request's record, ms (the default is SVC_RECORD_RETENTION_DAYS's, set by the caller)
  ARGV[16] now: the time now, ms ("" or absent: Redis TIME, as the gateway always sends): a test sets it
           to stand on either side of a budget period's boundary

  Every reply but {-11} ends with the account id and the API key id it was made for.

  Expired leases are reaped first (at most 20 here; the reaper loop does the rest).

  Returns {1, offerId, askCents, holdUsdc, holdDiem, leaseDeadline, confirmedAfter, upstreamBaseUrl,
    upstreamKeyEnc, upstreamBalance ("" unknown)} or
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
    {-11}                             no such API key (never minted, or revoked)
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
local account_id = ARGV[2]
local key_id = ARGV[3]
local hold_diem = int(ARGV[4])
local key_cap = int(ARGV[5])
local account_cap = int(ARGV[6])
local lease_ms = int(ARGV[7])
local default_max = int(ARGV[9])

local now = (ARGV[16] and ARGV[16] ~= '') and int(ARGV[16]) or now_ms()
local digest = ARGV[14] or ''
if digest ~= '' then
  local k = rcall('HMGET', k_apikey(digest), 'accountId', 'id', 'lastUsedAt')
  if not k[1] then return { -11 } end
  account_id, key_id = k[1], k[2]
  if now - int(k[3]) >= 60000 then rcall('HSET', k_apikey(digest), 'lastUsedAt', s(now)) end
end
-- Whose request this was goes at the end of every reply, for the caller's records.
local function reply(t)
  t[#t + 1] = account_id
  t[#t + 1] = key_id
  return t
end

keep_records_for(ARGV[15])
reap_expired(now, 20)

local account = k_account(account_id)
local key_held_field, key_inflight_field = 'held:' .. key_id, 'inflight:' .. key_id
-- The in-flight counts sit on the account hash beside its money: the same read and the same write.
local acct = rcall('HMGET', account, 'confirmed', 'maxPriceCents', 'held', 'limit:' .. key_id, 'spent:' .. key_id,
  key_held_field, 'inflight', key_inflight_field)
-- Every account hash has a confirmed field: none means no account (one call saved on the hot path).
if not acct[1] then return reply({ -1 }) end
if rcall('EXISTS', k_attempt(attempt_id)) == 1 then return reply({ -10 }) end

local key_count, account_count = int(acct[8]), int(acct[7])
if key_count >= key_cap then return reply({ -2 }) end
if account_count >= account_cap then return reply({ -3 }) end
local group = ARGV[12] or ''
local group_field, group_count = nil, 0
if group ~= '' then
  group_field = 'group:' .. group
  group_count = int(rcall('HGET', account, group_field))
  if group_count >= int(ARGV[13]) then return reply({ -3 }) end
end

local max_cents = int(acct[2])
if max_cents == 0 then max_cents = default_max end

local tried = {}
if ARGV[8] ~= '' then
  for id in string.gmatch(ARGV[8], '[^,]+') do tried[id] = true end
end

local chosen, refusal = pick_offer(max_cents, hold_diem, tried, now)
if not chosen then return reply(refusal) end

-- The buyer's worst case at this ask must be covered by confirmed balance alone.
local hold = ceil_div(hold_diem * chosen.ask, 100)
local confirmed = int(acct[1])
local hold_s = s(hold)
-- The key's limit counts its holds in flight, so concurrent requests can never take it past the
-- limit; checked before the balance, since funding would not help.
local key_held = int(acct[6])
-- A periodic budget: the start of the period this admission counts in, and whether it rolls on here.
local period, rolled = nil, false
if acct[4] then
  local used, resets_at = int(acct[5]), ''
  local p = rcall('HMGET', account, 'reset:' .. key_id, 'pstart:' .. key_id, 'pspent:' .. key_id)
  if p[1] then
    local start = period_start(p[1], now)
    -- A clock behind the period last counted (a failover to a lagging Redis) counts in that one:
    -- a period never rolls back, so its spent is never forgotten.
    if p[2] and int(p[2]) > start then start = int(p[2]) end
    period = s(start)
    rolled = p[2] ~= period
    used = rolled and 0 or int(p[3])
    resets_at = s(period_end(p[1], start))
  end
  used = used + key_held
  if used + hold > int(acct[4]) then
    return reply({ -12, acct[4], s(used), hold_s, chosen.ask, s(confirmed), resets_at })
  end
end
if confirmed < hold then return reply({ -9, hold_s, s(confirmed), chosen.ask }) end

-- Each hash written once from what was read above (one call each on the hot path).
-- Each number formatted once, for the writes and the reply.
local confirmed_s, hold_diem_s = s(confirmed - hold), s(hold_diem)
local held_s, key_held_s = s(int(acct[3]) + hold), s(key_held + hold)
local account_count_s, key_count_s = s(account_count + 1), s(key_count + 1)
if rolled or group_field then
  local fields = { 'confirmed', confirmed_s, 'held', held_s, key_held_field, key_held_s, 'inflight', account_count_s,
    key_inflight_field, key_count_s }
  if rolled then
    fields[#fields + 1], fields[#fields + 2] = 'pstart:' .. key_id, period
    fields[#fields + 1], fields[#fields + 2] = 'pspent:' .. key_id, '0'
  end
  if group_field then fields[#fields + 1], fields[#fields + 2] = group_field, s(group_count + 1) end
  rcall('HSET', account, unpack(fields))
else
  rcall('HSET', account, 'confirmed', confirmed_s, 'held', held_s, key_held_field, key_held_s, 'inflight',
    account_count_s, key_inflight_field, key_count_s)
end
local offer = k_offer(chosen.id)
rcall('HSET', offer, 'held', s(chosen.held + hold_diem), 'inflight', s(chosen.inflight + 1))
local deadline_s = s(now + lease_ms)
rcall('ZADD', K_LEASES, deadline_s, attempt_id)
local attempt = { 'id', attempt_id, 'state', 'admitted', 'accountId', account_id, 'keyId', key_id,
  'offerId', chosen.id, 'askCents', s(chosen.ask), 'holdUsdc', hold_s, 'holdDiem', hold_diem_s,
  'model', ARGV[10], 'requestId', ARGV[11], 'admittedAt', s(now) }
-- Usually empty, and then not written: every field is a listpack entry read back at the clear.
if ARGV[8] ~= '' then attempt[#attempt + 1], attempt[#attempt + 2] = 'tried', ARGV[8] end
if group ~= '' then attempt[#attempt + 1], attempt[#attempt + 2] = 'capGroup', group end
if period then attempt[#attempt + 1], attempt[#attempt + 2] = 'period', period end
rcall('HSET', k_attempt(attempt_id), unpack(attempt))
-- The supplier call needs the upstream; returning it saves a round trip on the hot path.
local balance = chosen.balance == nil and '' or s(chosen.balance)
return reply({ 1, chosen.id, chosen.ask, hold_s, hold_diem_s, deadline_s, confirmed_s,
  chosen.upstream_base_url, chosen.upstream_key_enc, balance })
