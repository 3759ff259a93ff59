-- lib/holds: the account's side of an admission, shared by admit (which picks the offer and holds
-- both sides in one call, where they share a server) and hold (the account's step alone, once the
-- offer's side was reserved on its own slot). Includes lib/keys, lib/numbers, lib/record.
--
-- The request being held is this library's state, set by open_hold and read by the functions after
-- it in the same call (Redis runs one call at a time): no table per request, so nothing more for
-- Lua's collector to sweep on every admission.
local H_account_id, H_key_id, H_account, H_acct, H_key_fields, H_key_held_field, H_key_inflight_field
local H_key_count, H_account_count, H_group_field, H_group_count, H_period, H_rolled, H_confirmed

-- Opens the account for one request: resolves the key's digest (when given), reads the account's
-- money, max price, the key's limit, held and in-flight counts and whether the key was revoked in
-- one call, and checks the in-flight caps. Returns the account's max price (0: none set) and nil,
-- or 0 and a refusal: {-11} no such key, or revoked (a caller that resolved the key earlier names
-- it by its ids: lua/revoke-key.lua marks a revoked key on its account), {-1} no such account,
-- {-2} / {-3} an in-flight cap reached. That the attempt id is new is checked by write_attempt,
-- the first write.
-- group: a cap group ('' for none) with its own cap, group_cap.
local function open_hold(attempt_id, account_id, key_id, digest, key_cap, account_cap, group, group_cap, now)
  if digest ~= '' then
    local k = rcall('HMGET', k_apikey(digest), 'accountId', 'id', 'lastUsedAt')
    if not k[1] then return 0, { -11 } end
    account_id, key_id = k[1], k[2]
    if now - stored(k[3]) >= 60000 then rcall('HSET', k_apikey(digest), 'lastUsedAt', s(now)) end
  end
  H_account_id, H_key_id, H_account = account_id, key_id, k_account(account_id)
  local kf = k_key_fields(key_id)
  H_key_fields, H_key_held_field, H_key_inflight_field = kf, kf.held, kf.inflight
  H_group_field, H_group_count, H_period, H_rolled = nil, 0, nil, false
  -- The in-flight counts sit on the account hash beside its money: the same read and the same write.
  -- The key's spent is read with its limit's period (check_hold): a key without a limit needs none.
  local acct = rcall('HMGET', H_account, 'confirmed', 'maxPriceCents', 'held', kf.limit,
    H_key_held_field, 'inflight', H_key_inflight_field, kf.revoked)
  H_acct = acct
  -- Every account hash has a confirmed field: none means no account (one call saved on the hot path).
  if not acct[1] then return 0, { -1 } end
  if acct[8] then return 0, { -11 } end
  H_key_count, H_account_count = stored(acct[7]), stored(acct[6])
  if H_key_count >= key_cap then return 0, { -2 } end
  if H_account_count >= account_cap then return 0, { -3 } end
  if group ~= '' then
    H_group_field = 'group:' .. group
    H_group_count = stored(rcall('HGET', H_account, H_group_field))
    if H_group_count >= group_cap then return 0, { -3 } end
  end
  return stored(acct[2]), nil
end

-- A reply with whose request it was at its end (the account and key open_hold found), for the
-- caller's records; a {-11} (no such key) names no one.
local function owned(t)
  if t[1] == -11 then return t end
  t[#t + 1] = H_account_id
  t[#t + 1] = H_key_id
  return t
end

-- Whether the opened account can hold this request at `ask` (cents per dollar): its key's limit
-- first (funding would not help), then its confirmed balance. Returns the hold (micro-USDC), or nil
-- and the refusal. A periodic limit's period is noted for write_hold and write_attempt.
local function check_hold(ask, hold_diem, now)
  local acct, key_id = H_acct, H_key_id
  -- The buyer's worst case at this ask must be covered by confirmed balance alone.
  local hold = ceil_div(hold_diem * ask, 100)
  local confirmed = stored(acct[1])
  H_confirmed = confirmed
  -- The key's limit counts its holds in flight, so concurrent requests can never take it past the
  -- limit.
  if acct[4] then
    local kf = H_key_fields
    local p = rcall('HMGET', H_account, kf.reset, kf.pstart, kf.pspent, kf.spent)
    local used, resets_at = stored(p[4]), ''
    if p[1] then
      local start = period_start(p[1], now)
      -- A clock behind the period last counted (a failover to a lagging Redis) counts in that one:
      -- a period never rolls back, so its spent is never forgotten.
      if p[2] and stored(p[2]) > start then start = stored(p[2]) end
      H_period = s(start)
      H_rolled = p[2] ~= H_period
      used = H_rolled and 0 or stored(p[3])
      resets_at = s(period_end(p[1], start))
    end
    used = used + stored(acct[5])
    if used + hold > stored(acct[4]) then
      return nil, { -12, acct[4], s(used), s(hold), ask, s(confirmed), resets_at }
    end
  end
  if confirmed < hold then return nil, { -9, s(hold), s(confirmed), ask } end
  return hold, nil
end

-- Holds `hold` on the opened account, as check_hold found it: confirmed to held, on the key too, its
-- in-flight counts up (and its budget period rolled on, where check_hold found it ended). One
-- write. Returns confirmed after, as a string.
local function write_hold(hold)
  local acct = H_acct
  local confirmed_s = s(H_confirmed - hold)
  local held_s, key_held_s = s(stored(acct[3]) + hold), s(stored(acct[5]) + hold)
  local account_count_s, key_count_s = s(H_account_count + 1), s(H_key_count + 1)
  if H_rolled or H_group_field then
    local fields = { 'confirmed', confirmed_s, 'held', held_s, H_key_held_field, key_held_s, 'inflight',
      account_count_s, H_key_inflight_field, key_count_s }
    if H_rolled then
      fields[#fields + 1], fields[#fields + 2] = H_key_fields.pstart, H_period
      fields[#fields + 1], fields[#fields + 2] = H_key_fields.pspent, '0'
    end
    if H_group_field then fields[#fields + 1], fields[#fields + 2] = H_group_field, s(H_group_count + 1) end
    rcall('HSET', H_account, unpack(fields))
    -- A new period is a new budget: its key.budget.100 may be written again (lib/events).
    if H_rolled then rcall('HDEL', H_account, H_key_fields.b100) end
  else
    rcall('HSET', H_account, 'confirmed', confirmed_s, 'held', held_s, H_key_held_field, key_held_s, 'inflight',
      account_count_s, H_key_inflight_field, key_count_s)
  end
  return confirmed_s
end

-- The attempt's record, admitted: whose it is, the offer and ask it holds at, the hold on both
-- sides. tried (offer ids already tried, ''), group ('') and the budget period go on only when set.
-- One field, packed (lib/record), written only if the attempt has none: an id used before (an
-- admission sent twice) returns false, and the caller writes nothing else.
local function write_attempt(attempt_id, offer_id, ask, hold_s, hold_diem_s, model, request_id, now, tried, group)
  return rcall('HSETNX', k_attempt(attempt_id), 'a', pack_admission(attempt_id, H_account_id, H_key_id, offer_id,
    s(ask), hold_s, hold_diem_s, stamp(now), request_id, tried, group, H_period or '', model)) == 1
end
