-- lib/keys: the market scripts' key names, built from KEYS[1], the keyspace base ("<prefix>:").
-- The same names as src/redis/keys.ts (a test checks that the two agree).
-- Set per call by use_keyspace (the scripts' prologue): loaded as a Redis function library, this
-- file runs once, before any call has KEYS.
local BASE, K_LADDER, K_FULL, K_DRY, K_TIERS, K_OFFERS, K_LEASES, K_EARLIER_LEASES, K_MARKET, K_WRITEOFFS, K_ENDED
local K_SUPPLIERS, K_SUPPLIER_WALLETS, K_UPSTREAM_KEYS, K_PAYOUTS_OPEN, K_WEBHOOKS_DUE, K_OFFERS_LISTING
-- The last account, offer and attempt named, and their keys: the hot scripts name each more than
-- once a call, and a concatenation is a new string for Lua to hash and later collect.
local last_account, last_account_key, last_offer, last_offer_key, last_attempt, last_attempt_key
local function use_keyspace(base)
  if base == BASE then return end
  BASE = base
  last_account, last_offer, last_attempt = nil, nil, nil
  K_LADDER, K_OFFERS = base .. 'ladder', base .. 'offers'
  -- On one slot, the active offers at their in-flight cap, off the ladder until a slot frees
  -- (lib/ladder): same scores.
  K_FULL = base .. 'ladder:full'
  -- On one slot, the active offers with less left than the market's minimum (lib/ladder): off the
  -- ladder until their remaining capacity rises again; same scores.
  K_DRY = base .. 'ladder:dry'
  -- On one slot, the ladder's offers with at least lib/ladder's TIER_FLOORS[t] of capacity not yet
  -- burned, one zset each, nested: a larger request walks the tier below its hold (lib/pick).
  K_TIERS = { base .. 'ladder:tier:1', base .. 'ladder:tier:2', base .. 'ladder:tier:3' }
  -- The leases of attempts with a packed record (lib/record) and of reservations; those admitted
  -- before the packing keep theirs in the earlier zset until they end. A gateway from before the
  -- packing reaps only that one, so it never meets an attempt it cannot read (it would drop the
  -- lease and keep the hold); this one reaps both (lib/reap).
  K_LEASES, K_EARLIER_LEASES = base .. 'leases:2', base .. 'leases'
  K_MARKET, K_WRITEOFFS = base .. 'market', base .. 'writeoffs'
  K_OFFERS_LISTING = base .. 'offers:listing'
  K_ENDED = base .. 'settled'
  K_SUPPLIERS, K_SUPPLIER_WALLETS = base .. 'suppliers', base .. 'supplierWallets'
  K_UPSTREAM_KEYS = base .. 'upstreamKeys'
  K_PAYOUTS_OPEN = base .. 'payouts:open'
  -- The owners flagged for the delivery consumers: on this base's slot (an account's shard's).
  K_WEBHOOKS_DUE = base .. 'webhooks:due'
end
local function k_account(id)
  if id ~= last_account then last_account, last_account_key = id, BASE .. 'acct:' .. id end
  return last_account_key
end
local function k_account_keys(id) return BASE .. 'acct:' .. id .. ':keys' end
local function k_account_payments(id) return BASE .. 'acct:' .. id .. ':payments' end
local function k_offer(id)
  if id ~= last_offer then last_offer, last_offer_key = id, BASE .. 'offer:' .. id end
  return last_offer_key
end
local function k_attempt(id)
  if id ~= last_attempt then last_attempt, last_attempt_key = id, BASE .. 'attempt:' .. id end
  return last_attempt_key
end
local function k_reservation(id) return BASE .. 'reservation:' .. id end
local function k_apikey(digest) return BASE .. 'apikey:' .. digest end
local function k_stats_day(day) return BASE .. 'stats:' .. day end
local function k_activity(account_id) return BASE .. 'acct:' .. account_id .. ':activity' end
local function k_supplier(id) return BASE .. 'supplier:' .. id end
local function k_supplier_offers(id) return BASE .. 'supplier:' .. id .. ':offers' end
local function k_supplier_offer_states(id) return BASE .. 'supplier:' .. id .. ':offer-states' end
local function k_supplier_keys(id) return BASE .. 'supplier:' .. id .. ':keys' end
local function k_supplier_fills(id) return BASE .. 'supplier:' .. id .. ':fills' end
local function k_supkey(digest) return BASE .. 'supkey:' .. digest end
local function k_siwe_nonce(nonce) return BASE .. 'siwe:nonce:' .. nonce end
local function k_payout(id) return BASE .. 'payout:' .. id end
local function k_supplier_payouts(id) return BASE .. 'supplier:' .. id .. ':payouts' end
local function k_payout_key(id, digest) return BASE .. 'supplier:' .. id .. ':payout-key:' .. digest end
local function k_payout_lock(wallet) return BASE .. 'payout:sender:' .. wallet end
local function k_payout_next_nonce(wallet) return BASE .. 'payout:next-nonce:' .. wallet end
-- A webhook owner ('acct:<id>' or 'supplier:<id>'): its hooks hash, its endpoints and its event stream.
local function k_hooks(owner) return BASE .. owner .. ':hooks' end
local function k_webhooks(owner) return BASE .. owner .. ':webhooks' end
local function k_events(owner) return BASE .. owner .. ':events' end

-- An API key's fields on its account's hash (held:<keyId>, spent:, inflight:, limit:, reset:,
-- pstart:, pspent:, b100:, revoked:), made once per key id and kept from call to call, as
-- lib/numbers keeps small numbers: at most 4096 keys' names.
local key_fields, key_fields_count = {}, 0
local function k_key_fields(key_id)
  local f = key_fields[key_id]
  if f then return f end
  f = { held = 'held:' .. key_id, spent = 'spent:' .. key_id, inflight = 'inflight:' .. key_id,
    limit = 'limit:' .. key_id, reset = 'reset:' .. key_id, pstart = 'pstart:' .. key_id,
    pspent = 'pspent:' .. key_id, b100 = 'b100:' .. key_id, revoked = 'revoked:' .. key_id }
  if key_fields_count < 4096 then key_fields[key_id], key_fields_count = f, key_fields_count + 1 end
  return f
end
