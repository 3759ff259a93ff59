--[[
  reserve: the offer's side of an admission where the account's is held apart (on a Cluster, the
  offer and the account live on slots of their own): the capacity one request may use, reserved on
  one offer the caller chose from its view of the ladder. The view may be stale: the offer is
  checked here against its own state (live, at or below the buyer's max, room for the hold, below
  its in-flight cap), and a refusal costs the caller a try at the next offer, never a reservation at
  a wrong price or past capacity. The reservation's lease is the offer's: lib/reap's reaper of the
  offer's base finds it, as admit's lease. Pending until post (cleared) or void (failed, refused).
  Includes lib/keys, lib/numbers, lib/ladder, lib/offers, lib/record, lib/attempts, lib/posts.

  KEYS[1]  the offer's keyspace base
  ARGV[1]  attemptId: attempt id (new, unique)
  ARGV[2]  offerId: the offer chosen
  ARGV[3]  holdDiem: the hold, micro-DIEM: the request's worst case
  ARGV[4]  maxCents: the buyer's max price, cents per dollar
  ARGV[5]  leaseMs: lease length, ms
  ARGV[6]  accountId: whose request it is (kept on the reservation, for the reaper)
  ARGV[7]  now: the time now, ms ("": Redis TIME)
  ARGV[8]  recordRetentionMs: how long a posted reservation and its fill are kept, ms
  ARGV[9..] posts carried, as lua/post.lua's ARGV[3..], all this offer's

  Returns {1, askCents, leaseDeadline, upstreamBaseUrl, upstreamKeyEnc, upstreamBalance ("" unknown),
  inflight, maxInFlight, routable, upstreamGen (as admit's)} (the offer's in-flight count with this reservation, its cap and
  what it could hold after it: what the caller's view of the ladder learns between its reads, so
  that its next request goes where there is room) or admit's refusals for this one offer, with what
  the view learns of it after the values admit's have:
    {-4}                                           no such offer, or deleted
    {-5, maxCents, askCents, "0"}                  its ask is above the buyer's max
    {-6, routable, routable, askCents}             it lacks the capacity for the hold
    {-7, inflight, maxInFlight, routable, askCents} at its in-flight cap
    {-7, cooldownUntil}                            cooling down until then (ms)
    {-7}                                           paused or its supplier suspended
    {-10}                                          attempt id already reserved here (and not voided)
]]
local attempt_id, offer_id = ARGV[1], ARGV[2]
local hold_diem, max_cents = int(ARGV[3]), int(ARGV[4])
local now = ARGV[7] ~= '' and int(ARGV[7]) or now_ms()
local batch = nil
if #ARGV > 8 then
  keep_records_for(ARGV[8])
  batch = {}
  post_all(ARGV, 9, now, batch, offer_id)
end
-- Posts for this offer are written with the reservation's own write below; any other's now.
local carried = batch and batch[offer_id]
if carried then batch[offer_id] = nil end
if batch then write_batch(batch, now) end
local o, f = read_offer(offer_id, now, RESERVE_FIELDS)
-- The offer as the carried posts leave it: the checks below count the capacity they give back.
local posted = {}
if carried and o then
  local held, inflight
  held, inflight, posted = batch_fields(carried, { f[5], f[8], f[4], f[13], f[3], f[14], f[15], f[16],
    o.upstream_gen })
  o.held, o.inflight, o.burned = held, inflight, o.burned + carried.burned
  local balance = batch_balance(carried, o.upstream_gen)
  if balance then o.balance = int(balance) end
end
local offer = k_offer(offer_id)
-- A refusal still writes what the carried posts changed.
local function refused(reply)
  if carried and o then
    rcall('HSET', offer, 'held', s(o.held), 'inflight', s(o.inflight), unpack(posted))
    append_fills(carried, f[16], offer_id, now)
  end
  return reply
end
if not o or o.status == 'deleted' then return refused({ -4 }) end
if o.ask > max_cents then return refused({ -5, s(max_cents), o.ask, '0' }) end
if not is_live(o, now) then
  -- Cooling down, it is back at cooldownUntil: the view need not read it again to know.
  if o.status == 'active' then return refused({ -7, s(o.cooldown_until) }) end
  return refused({ -7 })
end
local r = routable(o)
if o.inflight >= o.max_in_flight then
  return refused({ -7, s(o.inflight), s(o.max_in_flight), s(r), o.ask })
end
-- Its supplier's suspension, copied onto the offer (lua/offer-put.lua): read here only, since
-- admit on one slot never finds a suspended supplier's offer on its ladder.
if f[12] then return refused({ -7 }) end
if r < hold_diem then return refused({ -6, s(r), s(r), o.ask }) end
local reservation = k_reservation(attempt_id)
-- A reservation this attempt made and voided (its hold refused: the buyer's max, a waiting request
-- asking again under the same attempt) is made again, so a try repeated answers as the first did;
-- one still reserved or posted is this attempt's already.
local prior = rcall('HGET', reservation, 'state')
if prior and prior ~= 'voided' then return refused({ -10 }) end
if prior then rcall('PERSIST', reservation) end

local hold_diem_s, deadline_s = s(hold_diem), s(now + lease_ms(ARGV[5]))
rcall('HSET', offer, 'held', s(o.held + hold_diem), 'inflight', s(o.inflight + 1), unpack(posted))
if carried then append_fills(carried, f[16], offer_id, now) end
rcall('HSET', reservation, 'state', 'reserved', 'offerId', offer_id, 'accountId', ARGV[6], 'holdDiem', hold_diem_s,
  'askCents', s(o.ask))
rcall('ZADD', K_LEASES, deadline_s, attempt_id)
local balance = o.balance == nil and '' or s(o.balance)
return { 1, o.ask, deadline_s, o.upstream_base_url, o.upstream_key_enc, balance, s(o.inflight + 1),
  s(o.max_in_flight), s(r - hold_diem), o.upstream_gen }
