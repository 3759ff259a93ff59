--[[
  index-offer: the market's side of an offer held apart (the offer's hash lives under its own tag,
  written by lua/offer-put.lua there; its indexes, its supplier and the ladder on the market's).
  An offer is created in three steps: list here, write it on its own slot, place it here. `list`
  checks what only the market's slot knows (the supplier exists and is not suspended, its limits,
  the upstream key not standing in another offer), claims the key, adds the offer to the offers
  sets and answers its posting order; the offer is then listed as `listing` until `place` follows
  its write, so that a replica that stops between two steps leaves a listing the reaper finishes
  (the offer was written: place it) or undoes (never written: lua/offer-put.lua's `void` makes it
  deleted on its slot, and place gives its key back). A change of a written offer is listed so too
  (`touch`) before its write, so that one left unplaced is placed by the reaper. `place` follows
  every change of the offer:
  the ladder takes it while it is active and its supplier is not suspended, and the supplier's copy
  of its state (what suspension, reinstatement and the limits read) is updated; a deleted offer
  gives its upstream key back and stays deleted. Each place moves the ladder's version, so that
  every replica's view reads the offer again (lib/ladder's ladder_moved).
  Includes lib/keys, lib/numbers, lib/ladder.

  KEYS[1]  the market's keyspace base ("<prefix>:")
  ARGV[1]  mode: list | touch | place
  ARGV[2]  offerId: offer id
  ARGV[3]  supplierId: the offer's supplier ("" for the operator's offers)
  ARGV[4]  upstreamKeyDigest: list: SHA-256 hex of the upstream key to claim ("" none)
  ARGV[5]  status: place: the offer's own status (active | paused | deleted)
  ARGV[6]  score: place: its ladder score (ask x 1e9 + its posting order)
  ARGV[7]  maxStanding: list: the most offers a supplier may have standing (not deleted)
  ARGV[8]  maxEver: list: the most offers a supplier may ever post

  Returns  list: {1, posting order} or
             {-3, offer}   the upstream key is claimed by that offer
             {-4}          the supplier is suspended
             {-5}          unknown supplier
             {-6, limit}   the supplier is at its limit of offers standing or ever posted
           touch: {1}
           place: {1} or {2} when an active offer stays off the ladder because its supplier is
             suspended (the caller marks the offer so, lua/offer-put.lua's `suspend`)
]]

local mode, id, supplier_id = ARGV[1], ARGV[2], ARGV[3]
local states = supplier_id ~= '' and k_supplier_offer_states(supplier_id)
local listing = id .. ':' .. supplier_id

if mode == 'list' then
  local digest = ARGV[4]
  if states then
    local supplier = k_supplier(supplier_id)
    if rcall('EXISTS', supplier) == 0 then return { -5 } end
    if rcall('HGET', supplier, 'status') == 'suspended' then return { -4 } end
    local posted = rcall('SMEMBERS', k_supplier_offers(supplier_id))
    if #posted >= int(ARGV[8]) then return { -6, ARGV[8] } end
    local standing = 0
    for _, other in ipairs(posted) do
      if rcall('HGET', states, other) ~= 'deleted' then standing = standing + 1 end
    end
    if standing >= int(ARGV[7]) then return { -6, ARGV[7] } end
  end
  if digest ~= '' then
    local holder = rcall('HGET', K_UPSTREAM_KEYS, digest)
    if holder then return { -3, holder } end
  end
  rcall('SADD', K_OFFERS, id)
  rcall('ZADD', K_OFFERS_LISTING, now_ms(), listing)
  if states then
    rcall('SADD', k_supplier_offers(supplier_id), id)
    rcall('HSET', states, id, 'listed')
    if digest ~= '' then
      rcall('HSET', states, 'digest:' .. id, digest)
      rcall('HSET', K_UPSTREAM_KEYS, digest, id)
    end
  end
  return { 1, rcall('HINCRBY', K_MARKET, 'offerSeq', 1) }
end

if mode == 'touch' then
  rcall('ZADD', K_OFFERS_LISTING, now_ms(), listing)
  return { 1 }
end

local status, score = ARGV[5], ARGV[6]
rcall('ZREM', K_OFFERS_LISTING, listing)
local suspended = false
if states then
  -- Deleted is for good: a place that read the offer before its delete cannot bring it back.
  if rcall('HGET', states, id) == 'deleted' then status = 'deleted' end
  rcall('HSET', states, id, status, 'score:' .. id, score)
  suspended = rcall('HGET', k_supplier(supplier_id), 'status') == 'suspended'
  if status == 'deleted' then
    local digest = rcall('HGET', states, 'digest:' .. id)
    if digest and rcall('HGET', K_UPSTREAM_KEYS, digest) == id then rcall('HDEL', K_UPSTREAM_KEYS, digest) end
  end
end
ladder_moved()
if status == 'active' and not suspended then
  enlist(score, id)
  return { 1 }
end
unlist(id)
if status == 'active' then return { 2 } end
return { 1 }
