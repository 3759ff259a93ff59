--[[
  clear: end one admitted attempt that was served from its reported burn. Billable burn is the reported burn
  capped at what the request allows of it (ARGV[13]), at the attempt's hold (the worst case admit
  held for) and at what the offer has left; what the supplier reported beyond it is recorded as
  disputed and never paid. The buyer pays
  cost = ceil(billable x ask / 100) micro-USDC out of the hold (never more: the hold is that
  formula at the held burn), the rest of the hold goes back, the offer's capacity is burned, and the
  supplier earns exactly what the buyer paid less the fee (the offer keeps the fee beside its
  earnings, so buyer spend = earnings + fees, summed over accounts and offers). The lease and slots
  are released, the attempt record keeps it all (it is the request's record from then on), and the
  request counts once in its model's usage stats for the day, and in the market's totals.
  Idempotent: clearing a cleared attempt changes nothing (and counts nothing again).
  Includes lib/keys, lib/numbers, lib/ladder, lib/record, lib/attempts, lib/events (balance.low,
  key.budget.80/100).

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  attemptId: attempt id
  ARGV[2]  burn: reported burn, micro-DIEM (metered, or estimated when the stream ended without usage)
  ARGV[3]  feeBps: platform fee, basis points (0..10000)
  ARGV[4]  upstreamBalance: the supplier key's upstream balance after this request, micro-DIEM ("" unknown):
           recorded with its UTC day (balanceDay), and only when the attempt was admitted on the day
           of this clear (the upstream's allocation resets at 00:00 UTC; its answer came in between):
           never for a lost admission (ARGV[14..]), whose time of admission is not known
  ARGV[5]  inputTokens: input tokens
  ARGV[6]  outputTokens: output tokens
  ARGV[7]  estimated: "1" when the usage was estimated, "0" when metered
  ARGV[8]  outcome: outcome: completed | incomplete
  ARGV[9]  recordRetentionMs: how long the ended attempt is kept as the request's record, ms (the default is SVC_RECORD_RETENTION_DAYS's, set by the caller)
  ARGV[10] upstreamCost: the upstream's own cost of the request, micro-DIEM, when it disagrees with the reported
           burn ("" or absent: it agreed, or none came); recorded on the attempt, never billed
  ARGV[11] offerApart: "1" when the offer's side lives apart (reserved on its own slot by
           lua/reserve.lua): then nothing here reads or writes the offer, the billable burn is
           capped by the hold alone (the reservation kept that much of the offer's capacity), and
           the caller posts the offer's side with lua/post.lua from this reply; "0" (admit's attempts)
           clears both sides here
  ARGV[12] upstreamGen: the offer's upstream generation, as admit answered it (lua/offer-put.lua);
           "" not known (an admission that did not say): ARGV[4]'s balance is recorded only
           when the offer's upstream is still the one the request was sent to
  ARGV[13] boundedBurn: the burn of the reported usage as far as the request allows it (its prompt's
           true bound, max_tokens x n), micro-DIEM, when less than ARGV[2]: billed at most, the rest
           disputed as burn past the hold is ("" or absent: capped by the hold alone)
  ARGV[14..] the admission, only when the store has no attempt of this id: accountId, apiKeyId,
           offerId, askCents, holdUsdc, holdDiem, model, requestId, as admit answered them
           (src/market/clearing.ts sends them after a {-1}). A failover to a replica that the
           admission never reached loses the attempt, its hold and its reservation, while the
           request was served: the clear then writes the admission and clears it late (below), its
           record marked lateClear `lost`. Without them, or when the account (or, on one slot, the
           offer) is not in the store either, {-1} and nothing written.

  A late clear (the lease was reaped and the hold already returned) charges at most the confirmed
  balance and what the API key's limit has left (for a periodic budget, in the period the request
  was admitted in; nothing once that period has ended, since its spent is no longer kept); the supplier earns only what was charged, and the rest of the cost is written off: on
  the account, on the attempt, and in the write-off list (attempt id -> amount) the audit reads.
  A lost admission (ARGV[14..]) clears the same way: its hold is not in the store either.
  A clear on an offer with a supplierId is also appended to supplier:<id>:fills (offer, model,
  burn, ask, earned): the supplier's fills, never the buyer's identity.

  Returns {1, charged, cost, burn, askCents, confirmedAfter, writtenOff, replay(0|1), disputed, fee,
    balanceDay (the UTC day ARGV[4]'s balance holds on, days since 1970-01-01: what the caller posts
    with it when the offer lives apart; "" when not known: none given, or admitted on an earlier day;
    "" on a replay), clearedAt (the clear's time, ms, with offerApart only: what its fill counts
    at)} or
    {-1}   unknown attempt
    {-2}   the attempt was released (failed): nothing to clear
]]

local id = ARGV[1]
local a = read_attempt(id)
if not a then
  -- The admission the store lost, as admit answered it: admitted now, in the key's current period.
  if not ARGV[14] or ARGV[14] == '' then return { -1 } end
  local now_s = s(now_ms())
  a = { id = id, state = 'lost', accountId = ARGV[14], keyId = ARGV[15], offerId = ARGV[16], askCents = ARGV[17],
    holdUsdc = ARGV[18], holdDiem = ARGV[19], model = ARGV[20], period = '', admittedAt = now_s }
  a.admission = pack_admission(id, a.accountId, a.keyId, a.offerId, a.askCents, a.holdUsdc, a.holdDiem, now_s,
    ARGV[21] or '', '', '', '', a.model)
end
local account = k_account(a.accountId)
if a.state == 'cleared' then
  local c = read_cleared(a)
  return { 1, c[1], c[2], c[3], stored(a.askCents), rcall('HGET', account, 'confirmed'), c[4] or '0', 1, c[5] or '0',
    c[6] or '0', ARGV[11] == '1' and '' or nil, ARGV[11] == '1' and c[7] or nil }
end
if a.state == 'released' then return { -2 } end

local now = now_ms()
keep_records_for(ARGV[9])
local fee_bps = int(ARGV[3])
local ask = stored(a.askCents)
local apart = ARGV[11] == '1'
local offer = k_offer(a.offerId)
-- Read once: the unwind below writes from the same row.
local o = not apart and read_unwind_row(offer, fee_bps > 0 or ARGV[4] ~= '') or nil
-- A lost admission names an offer the store must still have: never a ghost row.
if a.state == 'lost' and o and not o[1] then return { -1 } end
-- The balance after, as known now: a request admitted before midnight may report one from before the reset.
-- A lost admission's time is not known (admitted "now" above only for its record): nor is its balance's day.
local balance, balance_day = balance_known(ARGV[4], a.state ~= 'lost' and a.admittedAt, now)
-- Learned through an upstream (a URL or key) the offer no longer has: not this offer's balance.
if o and balance ~= '' and (o[9] or '0') ~= ARGV[12] then balance, balance_day = '', nil end
local reported = int(ARGV[2])
local burn = reported
if ARGV[13] and ARGV[13] ~= '' and burn > int(ARGV[13]) then burn = int(ARGV[13]) end
local held = stored(a.holdDiem)
if burn > held then burn = held end
if o then
  -- Kept parsed on the row, as on the attempt below: the unwind adds to it.
  local burned = stored(o[3])
  o[3] = burned
  local left = stored(o[5]) - burned
  if left < 0 then left = 0 end
  if burn > left then burn = left end
end
local disputed = reported - burn

local cost = ceil_div(burn * ask, 100)
local charged, confirmed, fee, confirmed_s, hooks
if a.state == 'admitted' then
  charged = stored(a.holdUsdc)
  -- Its holds kept parsed: the unwind gives them back (lib/attempts parses a number at no cost).
  a.holdUsdc, a.holdDiem = charged, held
  if cost < charged then charged = cost end
  fee = idiv(charged * fee_bps, 10000)
  if apart then
    confirmed, confirmed_s, hooks = unwind_hold(a, charged)
  else
    confirmed, confirmed_s, hooks = unwind_attempt(a, charged, o, burn, charged - fee, fee, balance, disputed,
      balance_day)
  end
else
  -- reaped (or lost): the hold went back already (or never was); take what the balance can pay,
  -- never below zero, and never more than the key's limit has left (its spent and held count, as
  -- at admission)
  local kf = k_key_fields(a.keyId)
  local key_spent = kf.spent
  local b = rcall('HMGET', account, 'confirmed', kf.limit, key_spent, kf.held, kf.pstart, kf.pspent, 'hooks',
    kf.reset)
  -- A lost admission's account must still be there: never a ghost account.
  if a.state == 'lost' and not b[1] then return { -1 } end
  -- A lost admission is admitted now, in the key's current period: rolled on here as admit rolls it
  -- (lib/holds check_hold), so its charge counts in the period it falls in, not in one that ended.
  if a.state == 'lost' and b[8] then
    local start = period_start(b[8], now)
    if b[5] and stored(b[5]) > start then start = stored(b[5]) end
    local current = s(start)
    if b[5] ~= current then
      rcall('HSET', account, kf.pstart, current, kf.pspent, '0')
      rcall('HDEL', account, kf.b100)
      b[5], b[6] = current, '0'
    end
    a.period = current
    a.admission = pack_admission(id, a.accountId, a.keyId, a.offerId, a.askCents, a.holdUsdc, a.holdDiem,
      a.admittedAt, ARGV[21] or '', '', '', current, a.model)
  end
  confirmed, hooks = stored(b[1]), b[7]
  charged = cost < confirmed and cost or confirmed
  if b[2] then
    local used = stored(b[3])
    -- A periodic budget: what it spent in its current period, if that admitted the request.
    if b[5] then used = in_period(b[5], a.period, a.admittedAt) and stored(b[6]) or nil end
    local left = used and stored(b[2]) - used - stored(b[4]) or 0
    if left < 0 then left = 0 end
    if charged > left then charged = left end
  end
  fee = idiv(charged * fee_bps, 10000)
  if charged > 0 then
    confirmed = confirmed - charged
    rcall('HINCRBY', account, 'confirmed', s(-charged))
    rcall('HINCRBY', account, 'spent', s(charged))
    rcall('HINCRBY', account, key_spent, s(charged))
    count_in_period(account, a, charged, b[5])
  end
  if o then
    rcall('HINCRBY', offer, 'burned', s(burn))
    rcall('HINCRBY', offer, 'earned', s(charged - fee))
    if fee > 0 then rcall('HINCRBY', offer, 'fees', s(fee)) end
    if disputed > 0 then
      rcall('HSET', offer, 'disputed', s(capped_sum(stored(rcall('HGET', offer, 'disputed')), disputed)))
    end
    if balance ~= '' then rcall('HSET', offer, 'balance', balance, 'balanceDay', balance_day) end
    -- Its hold went back already: this burn lowers what it has left, which may leave it dry (lib/ladder).
    local unburned = stored(o[5]) - o[3]
    local left = unburned - stored(o[1])
    if burn > 0 and left - burn < DRY_CAP then
      local floor = dry_floor()
      if left >= floor and left - burn < floor then
        shift(K_LADDER, K_DRY, a.offerId, unburned)
        shift(K_FULL, K_DRY, a.offerId)
      end
    end
    -- A burn crossing a tier's floor takes it out of that tier (lib/ladder).
    if burn > 0 and unburned - burn < TIER_TOP then burn_tiers(a.offerId, unburned, burn) end
  end
end
local written_off = cost - charged
if written_off > 0 then
  rcall('HINCRBY', account, 'writtenOff', s(written_off))
  rcall('HSET', K_WRITEOFFS, a.id, s(written_off))
end
-- The market's running totals (GET /admin/v1/market, src/market/totals.ts): buyer spend and fees
-- are what the offers' earned and fees sum to, written above in the offer's own write (a charge
-- needs the offer's capacity, so its hash), so they need no call of their own; the market hash
-- keeps them only held apart, where the offer's side is posted on its own slot. Beside them,
-- write-offs and disputed burn (capped like the offer's, so no sum can overflow mid-script).
if apart then
  if charged > 0 then rcall('HINCRBY', K_MARKET, 'spent', s(charged)) end
  if fee > 0 then rcall('HINCRBY', K_MARKET, 'fees', s(fee)) end
end
if written_off > 0 then rcall('HINCRBY', K_MARKET, 'writtenOff', s(written_off)) end
if disputed > 0 then
  rcall('HSET', K_MARKET, 'disputed', s(capped_sum(stored(rcall('HGET', K_MARKET, 'disputed')), disputed)))
end

-- Each number formatted once, for the record and the reply.
local burn_s, cost_s, charged_s, ended_at = s(burn), s(cost), s(charged), stamp(now)
local late = nil
if a.state == 'reaped' then late = '1' elseif a.state == 'lost' then late = 'lost' end
-- The write-off, dispute, fee, estimate and upstream cost are usually zero or none, and then not
-- written (a missing value reads as 0).
end_attempt(a, pack_end_values('cleared', ended_at, charged_s, cost_s, burn_s, written_off > 0 and s(written_off) or nil,
  disputed > 0 and s(disputed) or nil, fee > 0 and s(fee) or nil, ARGV[5], ARGV[6], ARGV[8],
  ARGV[7] == '1' and '1' or nil, ARGV[10] ~= '' and ARGV[10] or nil, late, nil, nil), now, ARGV[8], charged_s, ARGV[5],
  ARGV[6], '')
if o and o[7] then append_fill(o[7], a.offerId, a.model or '', burn_s, a.askCents, s(charged - fee), now) end
-- Held apart, the served request counts on the offer's side (lua/post.lua): offers are far fewer
-- than accounts' shards, so the stats read stays small.
if not apart then count_served(a.model, now) end
emit_clear_events(a, charged, confirmed, now, hooks)
return { 1, charged_s, cost_s, burn_s, ask, confirmed_s or s(confirmed), written_off > 0 and s(written_off) or '0', 0,
  disputed > 0 and s(disputed) or '0', s(fee), balance_day or '', apart and ended_at or nil }
