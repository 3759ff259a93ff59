-- lib/attempts: giving back everything an admitted attempt holds. Release (failure), reap
-- (expired lease) and clear all end an attempt through here, so nothing is returned twice.

-- Each hash is read once and written once: every call counts on the hot path, and inside one
-- script a read-then-write is as atomic as HINCRBY.

-- A periodic key's charge counts in its current period's pspent when the request was admitted in
-- that period (lib/numbers in_period): once the key rolled on to a later period, in none, since no
-- later period admitted it (the ended period's spent is no longer read by anything). Exact either
-- way: never in a period that did not admit it. pstart: the key's current period, as read.
local function count_in_period(account, a, charge, pstart)
  if charge > 0 and in_period(pstart, a.period, a.admittedAt) then
    rcall('HINCRBY', account, k_key_fields(a.keyId).pspent, s(charge))
  end
end

-- The account's side of ending an attempt: its hold back to the buyer, `charge` (micro-USDC) of it
-- moved to spent, and its in-flight counts down. Returns the account's confirmed balance after, the
-- same as written (formatted once), and its count of webhook endpoints as read (lib/events).
local function unwind_hold(a, charge)
  local account = k_account(a.accountId)
  local hold = stored(a.holdUsdc)
  -- The key's own held and spent (its limit counts both) sit on the account hash beside the
  -- account's: the same read and the same write.
  -- Its in-flight counts too (a count at zero stays, as '0': one field per key, never an extra call).
  local kf = k_key_fields(a.keyId)
  local key_held, key_spent, key_inflight = kf.held, kf.spent, kf.inflight
  local b = rcall('HMGET', account, 'held', 'confirmed', 'spent', key_held, key_spent, 'inflight', key_inflight,
    kf.pstart, 'hooks')
  local confirmed = stored(b[2]) + hold - charge
  local kh = stored(b[4]) - hold
  -- an attempt admitted before keys kept their holds has none to give back
  if kh < 0 then kh = 0 end
  local an, kn = stored(b[6]) - 1, stored(b[7]) - 1
  if an < 0 then an = 0 end
  if kn < 0 then kn = 0 end
  local confirmed_s = s(confirmed)
  rcall('HSET', account, 'held', s(stored(b[1]) - hold), 'confirmed', confirmed_s, 'spent', s(stored(b[3]) + charge),
    key_held, s(kh), key_spent, s(stored(b[5]) + charge), 'inflight', s(an), key_inflight, s(kn))
  if a.capGroup and a.capGroup ~= '' then
    local group_field = 'group:' .. a.capGroup
    if stored(rcall('HGET', account, group_field)) > 0 then rcall('HINCRBY', account, group_field, '-1') end
  end
  count_in_period(account, a, charge, b[8])
  return confirmed, confirmed_s, b[9]
end

-- The supplier key's balance a request's upstream told (micro-DIEM, '' unknown), as it stands at
-- `now`: the upstream answered between the request's admission (`since`, ms; false if not known)
-- and now, and its allocation resets at 00:00 UTC, so across a midnight it may be from before the
-- reset and is not known. Returns the balance ('' when not known) and the UTC day it holds on,
-- formatted (lib/numbers day_of), or nil.
local function balance_known(balance, since, now)
  if balance == '' then return '', nil end
  local today = day_of(now)
  if day_of(stored(since)) ~= today then return '', nil end
  return balance, s(today)
end

-- The offer's side: the capacity it held for the attempt (hold_diem) and its slot back. For a
-- clear, it also records what it cleared, in the same write: o is its row as the clear read it
-- (read_unwind_row: read once per clear; its supplierId says whose fill it is), then burn,
-- earned, fee, balance (the upstream balance, '' unknown), disputed (burn reported beyond what
-- was billed) and balance_day (the UTC day the balance holds on, lib/numbers day_of, formatted; only
-- with a balance). Positional, not a table: this runs on every clear. Otherwise only (offer_id,
-- hold_diem).
-- Returns true when the slot given back was the one its cap lacked (it may stand in the full set,
-- lib/ladder), then whether its remaining capacity (capacity - burned - held) was dry before and is
-- not after (it stands in the dry set, and may stand on the ladder again; never the other way: what
-- comes back is the hold, less a burn within it).
local OFFER_CLEAR_FIELDS = { 'held', 'inflight', 'burned', 'earned', 'capacity', 'fees', 'disputed',
  'supplierId', 'upstreamGen' }
-- A clear on one slot reads the cap in place of disputed, read only for a dispute (rare), since
-- every field costs every clear (BENCHMARKS.md, "Offers at their cap off the ladder"). Both read
-- the offer's upstream generation (the one slot's where a balance came): a balance learned through
-- an upstream the offer no longer has is not recorded (lua/offer-put.lua).
-- Its fees and upstream generation only for a clear that needs them (`full`: a fee, a balance):
-- neither by default, and each field costs every clear. Named in the call, not unpacked from a
-- table: unpack is a C call.
local function read_unwind_row(offer, full)
  if full then
    return rcall('HMGET', offer, 'held', 'inflight', 'burned', 'earned', 'capacity', 'maxInFlight', 'supplierId',
      'fees', 'upstreamGen')
  end
  return rcall('HMGET', offer, 'held', 'inflight', 'burned', 'earned', 'capacity', 'maxInFlight', 'supplierId')
end
local function unwind_reservation(offer_id, hold_diem, o, burn, earned, fee, balance, disputed, balance_day)
  local offer = k_offer(offer_id)
  local cleared = o ~= nil
  if not cleared then o = rcall('HMGET', offer, 'held', 'inflight', 'maxInFlight', 'burned', 'capacity') end
  -- Offers are only ever marked deleted; a hash gone by hand is not brought back as a ghost.
  if not o[1] then return false, false end
  local held_n, hold_n = stored(o[1]), stored(hold_diem)
  local held, inflight = s(held_n - hold_n), s(stored(o[2]) - 1)
  -- What it had left before and has after: read on the dry side only (lib/ladder is_dry).
  local unburned = stored(o[5]) - stored(o[cleared and 3 or 4])
  local left = unburned - held_n
  local undried = false
  if left < DRY_CAP then
    local floor = dry_floor()
    undried = left < floor and left + hold_n - (burn or 0) >= floor
  end
  -- Capacity not yet burned, after this: a burn crossing a tier's floor takes it out (lib/ladder).
  if cleared and burn > 0 then
    if unburned - burn < TIER_TOP then burn_tiers(offer_id, unburned, burn) end
    unburned = unburned - burn
  end
  if not cleared then
    rcall('HSET', offer, 'held', held, 'inflight', inflight)
  elseif fee == 0 and balance == '' and disputed == 0 then
    -- the usual clear: no fee field, no balance reported, nothing disputed
    rcall('HSET', offer, 'held', held, 'inflight', inflight, 'burned', s(stored(o[3]) + burn), 'earned',
      s(stored(o[4]) + earned))
  else
    local fields = { 'held', held, 'inflight', inflight, 'burned', s(stored(o[3]) + burn), 'earned',
      s(stored(o[4]) + earned) }
    -- usually none: no field for it
    if fee > 0 then fields[#fields + 1], fields[#fields + 2] = 'fees', s(stored(o[8]) + fee) end
    if balance ~= '' then
      fields[#fields + 1], fields[#fields + 2], fields[#fields + 3], fields[#fields + 4] =
        'balance', balance, 'balanceDay', balance_day
    end
    if disputed > 0 then
      local was_disputed = stored(rcall('HGET', offer, 'disputed'))
      fields[#fields + 1], fields[#fields + 2] = 'disputed', s(capped_sum(was_disputed, disputed))
    end
    rcall('HSET', offer, unpack(fields))
  end
  -- Compared as written, both whole numbers in canonical form (the count by s(), the cap as posted):
  -- a cap is not parsed on every clear. An offer whose cap was written otherwise waits in the full
  -- set until a request finds nothing on the ladder (lib/pick).
  return o[2] == o[cleared and 6 or 3], undried, unburned
end

-- Both sides at once, where the account and the offer share a server (admit held both in one
-- call): the hold, the offer's capacity and slot, and the lease. o: read with read_unwind_row.
-- charge: micro-USDC moved from the hold to spent (0 on failure); the rest as unwind_reservation.
-- Returns what unwind_hold returns.
local function unwind_attempt(a, charge, o, burn, earned, fee, balance, disputed, balance_day)
  local confirmed, confirmed_s, hooks = unwind_hold(a, charge)
  -- Its cap no longer reached: back on the ladder from the full set; enough left again: back from
  -- the dry set, to the full set while its cap is still reached (lowered since) (lib/ladder).
  local freed, undried, unburned = unwind_reservation(a.offerId, a.holdDiem, o, burn, earned, fee, balance, disputed,
    balance_day)
  if undried then
    local c = rcall('HMGET', k_offer(a.offerId), 'inflight', 'maxInFlight')
    shift(K_DRY, stored(c[1]) >= stored(c[2]) and K_FULL or K_LADDER, a.offerId, unburned)
  elseif freed then
    shift(K_FULL, K_LADDER, a.offerId, unburned)
  end
  -- An attempt from before the packing has its lease in the earlier zset (lib/keys).
  rcall('ZREM', a.packed and K_LEASES or K_EARLIER_LEASES, a.id)
  return confirmed, confirmed_s, hooks
end

-- An attempt as the scripts read it: state (admitted until it ends), whose it is, the offer, ask
-- and holds, and packed (the shape of lib/record; e: its end, packed, once it ended). One admitted
-- before the packing is read field by field: only the fields the scripts read (every attempt has a
-- state), a missing one false; a field asked for and missing costs Redis a scan of the whole hash,
-- so what only a replayed clear reads is read there (read_cleared).
local function read_attempt(id)
  local key = k_attempt(id)
  local r = rcall('HMGET', key, 'a', 'e')
  if r[1] then
    local match = string.match
    local account_id, key_id, offer_id, ask, hold_usdc, hold_diem, admitted_at, group, period, model =
      match(r[1], ADMISSION)
    return { id = id, state = r[2] and match(r[2], END_STATE) or 'admitted', accountId = account_id,
      keyId = key_id, offerId = offer_id, askCents = ask, holdUsdc = hold_usdc, holdDiem = hold_diem, model = model,
      capGroup = group, period = period, admittedAt = admitted_at, packed = true, e = r[2] }
  end
  local f = rcall('HMGET', key, 'state', 'accountId', 'keyId', 'offerId', 'askCents', 'holdUsdc', 'holdDiem', 'model',
    'capGroup', 'period', 'admittedAt')
  if not f[1] then return nil end
  return { id = id, state = f[1], accountId = f[2], keyId = f[3], offerId = f[4], askCents = f[5],
    holdUsdc = f[6], holdDiem = f[7], model = f[8], capGroup = f[9], period = f[10], admittedAt = f[11] }
end

-- What a cleared attempt charged: costUsdc, cost, burn, writtenOff, disputed, fee (false when none),
-- and when it was cleared (endedAt, ms).
local function read_cleared(a)
  if not a.packed then
    return rcall('HMGET', k_attempt(a.id), 'costUsdc', 'cost', 'burn', 'writtenOff', 'disputed', 'fee', 'endedAt')
  end
  local _, ended_at, cost_usdc, cost, burn, written_off, disputed, fee = string.match(a.e, END_HEAD)
  return { cost_usdc, cost, burn, written_off ~= '' and written_off, disputed ~= '' and disputed, fee ~= '' and fee,
    ended_at }
end

-- An ended attempt is its request's record: GET /v1/agent/requests/{support_reference} reads the
-- attempt hashes themselves, so an attempt's record is written in the same script that ends it
-- and nothing is copied afterwards. It is kept for the record retention (SVC_RECORD_RETENTION_DAYS),
-- which each script that ends attempts sets first from its ARGV (the default is the caller's):
-- as a Redis function it is shared between calls, so none may rely on an earlier one's. Long
-- enough too for any replayed clear to find it (and be a no-op) and for a late result after a reap.
local record_ttl_ms, record_ttl_arg = nil, false
local function keep_records_for(ms)
  -- The same argument call after call: checked and formatted once.
  if ms == record_ttl_arg then return end
  if not ms or int(ms) <= 0 then error('the record retention, ms, is required') end
  record_ttl_ms, record_ttl_arg = s(int(ms)), ms
end

-- Every ended attempt also goes on two Streams, in the same script: its account's (what GET
-- /v1/agent/activity and /usage read), trimmed by the record retention (MINID: at least as long
-- as the attempt's own record), and the market's (what `svc-gateway export` tails), trimmed to
-- about ENDED_MAXLEN entries (an exporter further behind than that loses the oldest).
-- An entry is one field, e: its values joined by ENDED_SEP in the order of src/records/ended-entry.ts,
-- the model last (the one value not made by the gateway): one string built once for both Streams,
-- where a field per value cost Redis an argument and a listpack entry each, twice.
local ENDED_MAXLEN = '1000000'
local ENDED_SEP = '\31'

-- A trimmed append costs Redis about a third more than a plain one (it rewrites the approximate
-- trim into an exact one for its replicas and AOF), so the appends trim in one call of TRIM_EVERY,
-- chosen by the clock's millisecond so that every workload trims: a Stream runs past its bound by
-- a few entries for a while, and nothing is trimmed sooner than before.
local TRIM_EVERY = 16
local function trims(now)
  return now % TRIM_EVERY == 0
end

-- The MINID of a Stream trimmed by the record retention: now less the retention, formatted again
-- only once a minute or when the retention changed (a minute more kept is still at least the
-- retention).
local trim_minute, trim_ttl, trim_minid = -1, nil, nil
local function retention_minid(now)
  local minute = floor(now / 60000)
  if minute ~= trim_minute or trim_ttl ~= record_ttl_ms then
    trim_minute, trim_ttl, trim_minid = minute, record_ttl_ms, s(minute * 60000 - int(record_ttl_ms))
  end
  return trim_minid
end

-- Ends an attempt read as `a` with its end, e, packed (lib/record pack_end; state and endedAt
-- always): one write, in the attempt's own shape, and the record kept for the retention. `a` itself
-- is not updated: no caller reads it after. A refusal, never admitted, brings its admission along
-- (a.admission, packed). status (completed|incomplete|failed|expired|refused), cost (micro-USDC
-- charged), the tokens and the error code are what its Stream entries carry beyond `a` ('' where
-- none).
local function end_attempt(a, e, now, status, cost, input_tokens, output_tokens, error_code)
  local key = k_attempt(a.id)
  if a.admission then
    rcall('HSET', key, 'a', a.admission, 'e', e)
  elseif a.packed then
    rcall('HSET', key, 'e', e)
  else
    -- One admitted before the packing: a field per value, those not empty.
    local fields, n, i = {}, 0, 0
    for v in string.gmatch(e .. REC_SEP, '([^\31]*)\31') do
      i = i + 1
      if v ~= '' then fields[n + 1], fields[n + 2], n = END_FIELDS[i], v, n + 2 end
    end
    rcall('HSET', key, unpack(fields))
  end
  rcall('PEXPIRE', key, record_ttl_ms)
  local sep = ENDED_SEP
  local entry = a.id .. sep .. a.accountId .. sep .. (a.keyId or '') .. sep .. status .. sep .. cost .. sep ..
    (a.askCents or '') .. sep .. input_tokens .. sep .. output_tokens .. sep .. (a.offerId or '') .. sep ..
    error_code .. sep .. (a.model or '')
  if trims(now) then
    rcall('XADD', k_activity(a.accountId), 'MINID', '~', retention_minid(now), '*', 'e', entry)
    rcall('XADD', K_ENDED, 'MAXLEN', '~', ENDED_MAXLEN, '*', 'e', entry)
  else
    rcall('XADD', k_activity(a.accountId), '*', 'e', entry)
    rcall('XADD', K_ENDED, '*', 'e', entry)
  end
end

-- Usage stats: a served request counts once in its model's bucket for the day it ended.
local STATS_TTL_S = '2764800'
-- The UTC day's name, computed again only when a call falls outside it (as a function, the
-- library's state lives from call to call).
local stats_day, stats_day_start, stats_key, stats_base = nil, -1, nil, nil
local function count_served(model, now)
  if now < stats_day_start or now >= stats_day_start + 86400000 then
    stats_day, stats_day_start, stats_base = utc_day(now), floor(now / 86400000) * 86400000, nil
  end
  if stats_base ~= BASE then stats_key, stats_base = k_stats_day(stats_day), BASE end
  local day = stats_key
  if rcall('HINCRBY', day, model, '1') == 1 then rcall('EXPIRE', day, STATS_TTL_S) end
end

-- A clear on a self-served offer is its supplier's fill, appended in the same script: what the
-- offer sold and earned, never whose request it was. Trimmed like the account's Stream, as often.
-- cleared_at: the clear's time (ms, formatted) where the fill is written in a later UTC hour than
-- the clear (a post held apart, carried late): the fill counts at it (src/records/stream-sums.ts).
local function append_fill(supplier_id, offer_id, model, burn, ask, earned, now, cleared_at)
  local fills = k_supplier_fills(supplier_id)
  if cleared_at then
    rcall('XADD', fills, '*', 'offer', offer_id, 'model', model, 'burnDiem', burn, 'askCents', ask, 'earnedUsdc',
      earned, 'clearedAt', cleared_at)
  elseif trims(now) then
    rcall('XADD', fills, 'MINID', '~', retention_minid(now), '*', 'offer', offer_id, 'model', model, 'burnDiem', burn,
      'askCents', ask, 'earnedUsdc', earned)
  else
    rcall('XADD', fills, '*', 'offer', offer_id, 'model', model, 'burnDiem', burn, 'askCents', ask, 'earnedUsdc', earned)
  end
end
