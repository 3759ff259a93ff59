-- lib/keys: the market scripts' key names, built from KEYS[1], the keyspace base ("<prefix>:").
-- The same names as src/redis/keys.ts (a test checks that the two agree).
local BASE = KEYS[1]
local function k_account(id) return BASE .. 'acct:' .. id end
local function k_offer(id) return BASE .. 'offer:' .. id end
local function k_attempt(id) return BASE .. 'attempt:' .. id end
local function k_apikey(digest) return BASE .. 'apikey:' .. digest end
local K_LADDER = BASE .. 'ladder'
local K_OFFERS = BASE .. 'offers'
local K_LEASES = BASE .. 'leases'
local K_INFLIGHT = BASE .. 'inflight'
local K_MARKET = BASE .. 'market'
local function k_stats_day(day) return BASE .. 'stats:' .. day end
