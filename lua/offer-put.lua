--[[
  offer-put: create or change an offer and its place on the ladder in one step.
  Includes lib/keys, lib/numbers, lib/ladder, lib/offers.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  mode: mode: create | update | delete; held apart also suspend | reinstate (the
           supplier's suspension copied onto the offer, which the request path reads) and void
           (an offer listed but never written is written deleted, so that a late create finds it
           taken: src/market/offer-index.ts)
  ARGV[2]  offerId: offer id
  ARGV[3]  upstreamBaseUrl: upstream base URL ("" keeps)
  ARGV[4]  upstreamKeyEnc: upstream key, encrypted ("" keeps)
  ARGV[5]  askCents: ask, cents 30..80 ("" keeps)
  ARGV[6]  capacity: posted capacity, micro-DIEM ("" keeps)
  ARGV[7]  maxInFlight: per-key in-flight cap ("" keeps)
  ARGV[8]  status: status: active | paused ("" keeps)
  ARGV[9]  supplier: supplier label ("" keeps)
  ARGV[10] supplierId: supplier id: on create, the self-served offer's owner (kept as supplierId, and the
           offer joins supplier:<id>:offers); on update / delete, only that supplier's offer is
           found. "" for the operator, who may change any offer.
  ARGV[11] upstreamKeyDigest: on create, SHA-256 hex of the upstream key ("" none): claimed in upstreamKeys for this
           offer, and given up when the offer is deleted
  ARGV[12] maxStanding: on a supplier's create, the most offers it may have standing (not deleted)
  ARGV[13] maxEver: on a supplier's create, the most offers it may ever post (deleted ones keep their
           earnings, which lua/payout-create.lua sums: this bounds that loop)
  ARGV[14] seq: on create, the offer's posting order when the market's indexes gave it (a market
           held apart: lua/index-offer.lua); "" or absent: counted here
  ARGV[15] apart: "1" in a market held apart: KEYS[1] is the offer's own base, and the market's
           indexes, its supplier and the ladder are on another slot (lua/index-offer.lua checks and
           keeps them, before and after this step); only the offer's own hash is read and written
  ARGV[16] upstreamBalance: the DIEM balance, micro-DIEM, the upstream told for the upstream key written
           here (ARGV[4]) when it vouched for it ("" none told): the offer's balance for the day,
           on that key's upstream generation; ignored when ARGV[4] is ""
  ARGV[17] balanceSince: when that check was sent, ms on Redis's clock: told across a midnight, the
           balance may be from before the reset, and is not recorded

  Only active offers stand on the ladder, scored ask * 1e9 + posting order (stable ties), and
  not while their supplier is suspended. An offer put here stands where its row says (lib/ladder
  stand): in the dry set while what it has left is below the market's minimum (a capacity raised
  past it brings it back), in the full set while at its cap, else on the ladder. A suspended supplier's offer cannot be
  posted or set active. A deleted offer keeps its hash (in-flight attempts and the audit still
  read it). A change of the upstream (its base URL or key) forgets the upstream balance and moves
  the offer's upstreamGen on (absent: 0): a request admitted on the one before, still in flight,
  records no balance when it ends (lua/clear.lua, release.lua, post.lua, void.lua).

  Returns {1} or ({0} on void: the offer was written, nothing done)
    {-1}                 unknown (or deleted) offer on update / delete; existing id on create
    {-2, burned, held}   capacity below what is already burned plus held
    {-3}                 the upstream key already stands in another offer
    {-4}                 the offer's supplier is suspended
    {-5}                 unknown supplier on create
    {-6, limit}          the supplier is at its limit of offers standing or ever posted
    {-7}                 a change of a supplier's offer's upstream (its base URL or key): the
                         supplier is paid for what that key serves, so the key it posted stays
]]

local mode, id = ARGV[1], ARGV[2]
local supplier_id, digest = ARGV[10] or '', ARGV[11] or ''
local apart = ARGV[15] == '1'
local offer = k_offer(id)
local exists = rcall('EXISTS', offer) == 1 and rcall('HGET', offer, 'status') ~= 'deleted'

if mode == 'suspend' or mode == 'reinstate' then
  if rcall('EXISTS', offer) == 0 then return { -1 } end
  if mode == 'suspend' then rcall('HSET', offer, 'suspended', '1') else rcall('HDEL', offer, 'suspended') end
  return { 1 }
end
if mode == 'void' then
  if rcall('EXISTS', offer) == 1 then return { 0 } end
  rcall('HSET', offer, 'id', id, 'status', 'deleted', 'seq', 0, 'burned', 0, 'held', 0, 'inflight', 0,
    'earned', 0, 'createdAt', s(now_ms()))
  if supplier_id ~= '' then rcall('HSET', offer, 'supplierId', supplier_id) end
  return { 1 }
end

local owner
if mode == 'create' then
  if rcall('EXISTS', offer) == 1 then return { -1 } end
  if supplier_id ~= '' then owner = supplier_id end
  -- Held apart, lua/index-offer.lua checked the supplier, its limits and the key before this step.
  if owner and not apart then
    if rcall('EXISTS', k_supplier(owner)) == 0 then return { -5 } end
    local posted = rcall('SMEMBERS', k_supplier_offers(owner))
    if #posted >= int(ARGV[13]) then return { -6, ARGV[13] } end
    local standing = 0
    for _, other in ipairs(posted) do
      if rcall('HGET', k_offer(other), 'status') ~= 'deleted' then standing = standing + 1 end
    end
    if standing >= int(ARGV[12]) then return { -6, ARGV[12] } end
  end
  if digest ~= '' and not apart and rcall('HEXISTS', K_UPSTREAM_KEYS, digest) == 1 then return { -3 } end
else
  if not exists then return { -1 } end
  owner = rcall('HGET', offer, 'supplierId')
  if supplier_id ~= '' and owner ~= supplier_id then return { -1 } end
  if owner and (ARGV[3] ~= '' or ARGV[4] ~= '') then return { -7 } end
end
-- Held apart, the supplier's status is the copy on the offer (the supplier's hash is elsewhere).
local suspended = owner and (rcall('HGET', k_supplier(owner), 'status') == 'suspended'
  or rcall('HGET', offer, 'suspended') == '1')
if suspended and (mode == 'create' or ARGV[8] == 'active') then return { -4 } end

if mode == 'create' then
  local seq = (ARGV[14] and ARGV[14] ~= '') and ARGV[14] or rcall('HINCRBY', K_MARKET, 'offerSeq', 1)
  rcall('HSET', offer, 'id', id, 'seq', seq, 'burned', 0, 'held', 0, 'inflight', 0, 'earned', 0,
    'balance', '', 'balanceDay', '', 'cooldownUntil', 0, 'createdAt', s(now_ms()))
  if not apart then rcall('SADD', K_OFFERS, id) end
  if owner then
    rcall('HSET', offer, 'supplierId', owner)
    if not apart then rcall('SADD', k_supplier_offers(owner), id) end
  end
  if digest ~= '' then
    rcall('HSET', offer, 'upstreamKeyDigest', digest)
    if not apart then rcall('HSET', K_UPSTREAM_KEYS, digest, id) end
  end
end

if mode == 'delete' then
  rcall('HSET', offer, 'status', 'deleted')
  if apart then return { 1 } end
  unlist(id)
  local claimed = rcall('HGET', offer, 'upstreamKeyDigest')
  if claimed and rcall('HGET', K_UPSTREAM_KEYS, claimed) == id then rcall('HDEL', K_UPSTREAM_KEYS, claimed) end
  return { 1 }
end

if ARGV[6] ~= '' then
  local f = rcall('HMGET', offer, 'burned', 'held')
  if int(ARGV[6]) < int(f[1]) + int(f[2]) then return { -2, f[1], f[2] } end
end
local fields = { 'upstreamBaseUrl', ARGV[3], 'upstreamKeyEnc', ARGV[4], 'askCents', ARGV[5],
  'capacity', ARGV[6], 'maxInFlight', ARGV[7], 'status', ARGV[8], 'supplier', ARGV[9] }
for i = 1, #fields, 2 do
  if fields[i + 1] ~= '' then rcall('HSET', offer, fields[i], fields[i + 1]) end
end
-- Another upstream or key is another allocation: the old key's balance (a 402's 0) says nothing of it.
-- Its generation moves on, so that a request still in flight on the old one records none (lua/clear.lua).
if mode == 'update' and (ARGV[3] ~= '' or ARGV[4] ~= '') then
  rcall('HSET', offer, 'balance', '', 'balanceDay', '')
  rcall('HINCRBY', offer, 'upstreamGen', 1)
end
-- The balance the key's check told, written with the key (after its generation moved on): that
-- key's only. Known for the UTC day the check was made on, as a request's balance is (lua/clear.lua).
local told = number(ARGV[16] or '')
if told and told >= 0 and told <= MAX_EXACT and told % 1 == 0 and ARGV[4] ~= '' then
  local today = day_of(now_ms())
  if day_of(int(ARGV[17])) == today then rcall('HSET', offer, 'balance', s(told), 'balanceDay', s(today)) end
end

if apart then return { 1 } end
local o = rcall('HMGET', offer, 'status', 'askCents', 'seq')
if o[1] == 'active' and not suspended then
  stand(int(o[2]) * LADDER_STEP + int(o[3]), id)
else
  unlist(id)
end
return { 1 }
