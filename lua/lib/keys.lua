-- lib/keys: the market scripts' key names, built from KEYS[1], the keyspace base ("<prefix>:").
-- The same names as src/redis/keys.ts (a test checks that the two agree).
-- Set per call by use_keyspace (the scripts' prologue): loaded as a Redis function library, this
-- file runs once, before any call has KEYS.
local BASE, K_LADDER, K_OFFERS, K_LEASES, K_INFLIGHT, K_MARKET, K_WRITEOFFS, K_SETTLED
local function use_keyspace(base)
  if base == BASE then return end
  BASE = base
  K_LADDER, K_OFFERS, K_LEASES = base .. 'ladder', base .. 'offers', base .. 'leases'
  K_INFLIGHT, K_MARKET, K_WRITEOFFS = base .. 'inflight', base .. 'market', base .. 'writeoffs'
  K_SETTLED = base .. 'settled'
end
local function k_account(id) return BASE .. 'acct:' .. id end
local function k_offer(id) return BASE .. 'offer:' .. id end
local function k_attempt(id) return BASE .. 'attempt:' .. id end
local function k_apikey(digest) return BASE .. 'apikey:' .. digest end
local function k_stats_day(day) return BASE .. 'stats:' .. day end
local function k_activity(account_id) return BASE .. 'acct:' .. account_id .. ':activity' end
