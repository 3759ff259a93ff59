-- lib/events: webhook events, appended to their owner's stream by the script that causes them, in
-- the same call: an event is never lost, nor written for something that did not happen. Written
-- only when one of the owner's endpoints subscribes to the type: one HGET of the owner's hooks hash
-- (kept by lua/webhook-put.lua and webhook-delete.lua: t:<type> -> endpoints, low:<id> -> threshold).
-- One stream per owner, under the owner's own name (acct:<id>, supplier:<id>): when the market is
-- sharded by owner its events move with it, and one owner's backlog never delays another's. The
-- owner is flagged in the due set on the same slot (webhooks:due), so a consumer's pass costs the
-- owners with something to send, not every owner with an endpoint.
-- Includes lib/keys, lib/numbers. Capped near EVENTS_MAXLEN: a stream is trimmed, never unbounded.
local EVENTS_MAXLEN = 10000

-- Micro-USDC as the wire's decimal string ("12.345678").
local function usdc(micros)
  return string.format('%d.%06d', math.floor(micros / 1000000), micros % 1000000)
end

-- owner: 'acct:<id>' or 'supplier:<id>'; now: ms, a number or already a string (payout-move's);
-- data: a table of strings (money as decimal strings).
local function emit_event(owner, kind, now, data)
  if not rcall('HGET', k_hooks(owner), 't:' .. kind) then return end
  local at = type(now) == 'string' and now or s(now)
  rcall('XADD', k_events(owner), 'MAXLEN', '~', EVENTS_MAXLEN, '*', 'type', kind, 'at', at,
    'data', cjson.encode(data))
  -- Flagged for the consumers, which read only flagged owners' streams between sweeps.
  rcall('SADD', K_WEBHOOKS_DUE, owner)
end

-- An account's webhook owner name and hooks key, for the last account asked (every clear with a
-- charge asks; concatenated again only for another account).
local hooks_base, hooks_account, hooks_owner, hooks_key
local function account_hooks(account_id)
  if account_id ~= hooks_account or hooks_base ~= BASE then
    hooks_base, hooks_account, hooks_owner = BASE, account_id, 'acct:' .. account_id
    hooks_key = k_hooks(hooks_owner)
  end
  return hooks_owner, hooks_key
end

-- After a clear charged `charged` and left `confirmed` spendable: balance.low for each endpoint's
-- threshold that the request took the balance below (once per crossing: it must be back above it
-- before it fires again), key.budget.80 as the key's spent first reaches 80 % of its limit (a
-- periodic key counts its current period's spent), and key.budget.100 once the key's budget is
-- used up: its spent reached the limit, or what is left of it (less its other requests in flight)
-- can no longer hold a request like the one just cleared, which would be refused from now on.
-- Since every request holds its worst case, a key is refused before its spent quite reaches the
-- limit: "used up" is what its owner needs to hear. Written once per budget, marked on the account
-- hash as b100:<keyId>, which a new period (lib/holds write_hold) and a changed limit
-- (lua/set-key-limit.lua) remove.
-- hooks: the account's count of endpoints, as the clear read it on the account hash (kept by
-- lua/webhook-put.lua and webhook-delete.lua): at '0' there is nothing to look up, the usual case.
-- An account that has no count (made before it) is counted here, once: its clears after read it.
local function emit_clear_events(a, charged, confirmed, now, count)
  if charged <= 0 or count == '0' then return end
  local owner, hooks = account_hooks(a.accountId)
  if not count then
    local endpoints = rcall('HLEN', k_webhooks(owner))
    rcall('HSET', k_account(a.accountId), 'hooks', endpoints)
    if endpoints == 0 then return end
  end
  local h = rcall('HMGET', hooks, 't:balance.low', 't:key.budget.80', 't:key.budget.100')
  if h[1] then
    local fields = rcall('HGETALL', hooks)
    -- One event per threshold: every endpoint at that threshold wants it (src/webhooks/delivery.ts
    -- wants), so a second event for endpoints that share one would reach each of them twice.
    local written = {}
    for i = 1, #fields, 2 do
      local threshold = string.sub(fields[i], 1, 4) == 'low:' and int(fields[i + 1])
      if threshold and not written[threshold] and confirmed + charged >= threshold and confirmed < threshold then
        written[threshold] = true
        emit_event(owner, 'balance.low', now, { thresholdUsdc = usdc(threshold), balanceUsdc = usdc(confirmed) })
      end
    end
  end
  if not (h[2] or h[3]) then return end
  local account = k_account(a.accountId)
  local kf = k_key_fields(a.keyId)
  local marker = kf.b100
  local b = rcall('HMGET', account, kf.limit, kf.spent, kf.pstart, kf.pspent, kf.held, marker)
  if not b[1] then return end
  local limit, spent = int(b[1]), int(b[2])
  if b[3] then
    if not in_period(b[3], a.period, a.admittedAt) then return end
    spent = int(b[4])
  end
  local data = { keyId = a.keyId, limitUsdc = usdc(limit), spentUsdc = usdc(spent) }
  local mark = math.ceil(limit * 80 / 100)
  if h[2] and spent - charged < mark and spent >= mark then
    data.percent = 80
    emit_event(owner, 'key.budget.80', now, data)
  end
  if h[3] and not b[6] and (spent >= limit or limit - spent - int(b[5]) < int(a.holdUsdc)) then
    rcall('HSET', account, marker, '1')
    data.percent = 100
    emit_event(owner, 'key.budget.100', now, data)
  end
end
