--[[
  supplier-status: the operator suspends or reinstates a supplier. Suspended, its offers leave the
  ladder at once (requests in flight on them finish and clear); reinstated, those that are active
  stand on it again at their ask and posting order. Payouts read the same status field.
  A change of status writes supplier.suspended or supplier.reinstated (lib/events), same call.
  Includes lib/keys, lib/numbers, lib/offers, lib/events.

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
if was ~= status then
  emit_event('supplier:' .. id, status == 'suspended' and 'supplier.suspended' or 'supplier.reinstated',
    now_ms(), { supplierId = id })
end
local moved = 0
for _, offer_id in ipairs(rcall('SMEMBERS', k_supplier_offers(id))) do
  local o = rcall('HMGET', k_offer(offer_id), 'status', 'askCents', 'seq')
  if o[1] == 'active' then
    if status == 'active' then
      rcall('ZADD', K_LADDER, int(o[2]) * LADDER_STEP + int(o[3]), offer_id)
    else
      rcall('ZREM', K_LADDER, offer_id)
    end
    moved = moved + 1
  end
end
return { 1, moved }
