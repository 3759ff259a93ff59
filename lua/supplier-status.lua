--[[
  supplier-status: the operator suspends or reinstates a supplier. Suspended, its offers leave the
  ladder at once (requests in flight on them finish and clear); reinstated, those that are active
  stand on it again at their ask and posting order. Payouts read the same status field. Held
  apart, the caller copies the status onto each offer's own hash (lua/offer-put.lua's suspend and
  reinstate), after this script, and moves the ladder's version again once they carry it.
  A change of status writes supplier.suspended or supplier.reinstated (lib/events), same call.
  Includes lib/keys, lib/numbers, lib/ladder, lib/offers, lib/events.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  supplierId: supplier id
  ARGV[2]  status: status: active | suspended

  Returns {1, offers moved on or off the ladder} or
    {-1}  unknown supplier
]]

local id, status = ARGV[1], ARGV[2]
local supplier = k_supplier(id)
local was = rcall('HGET', supplier, 'status')
if rcall('EXISTS', supplier) == 0 then return { -1 } end
rcall('HSET', supplier, 'status', status)
ladder_moved()
if was ~= status then
  emit_event('supplier:' .. id, status == 'suspended' and 'supplier.suspended' or 'supplier.reinstated',
    now_ms(), { supplierId = id })
end
local moved = 0
-- Held apart, each offer's hash is on a slot of its own: its state is read from the copy here
-- (lua/index-offer.lua keeps it), and the caller copies the suspension onto the offers themselves.
local states = k_supplier_offer_states(id)
for _, offer_id in ipairs(rcall('SMEMBERS', k_supplier_offers(id))) do
  local state, score = unpack(rcall('HMGET', states, offer_id, 'score:' .. offer_id))
  local one_slot = not state
  if one_slot then
    local o = rcall('HMGET', k_offer(offer_id), 'status', 'askCents', 'seq')
    state, score = o[1], o[1] and int(o[2]) * LADDER_STEP + int(o[3])
  end
  if state == 'active' then
    if status == 'active' then
      -- On one slot its row says where it stands (lib/ladder); held apart only the ladder exists.
      if one_slot then stand(score, offer_id) else enlist(score, offer_id) end
    else
      unlist(offer_id)
    end
    moved = moved + 1
  end
end
return { 1, moved }
