-- The floor of a clear (bench only): charge the buyer from the hold, return the rest, burn the
-- offer's capacity and credit the supplier, forget the hold. No idempotency, record or stats.
-- KEYS[1] keyspace base; ARGV: attempt id, burn (micro-DIEM).
local base = KEYS[1]
local attempt = base .. 'floor:attempt:' .. ARGV[1]
local t = redis.call('HMGET', attempt, 'account', 'offer', 'hold', 'holdDiem')
local account = base .. 'floor:acct:' .. t[1]
local offer = base .. 'floor:offer:' .. t[2]
local burn = tonumber(ARGV[2])
local cost = math.ceil(burn * 50 / 100)
local a = redis.call('HMGET', account, 'confirmed', 'held')
local o = redis.call('HMGET', offer, 'held', 'burned', 'earned')
redis.call('HSET', account, 'confirmed', a[1] + t[3] - cost, 'held', a[2] - t[3])
redis.call('HSET', offer, 'held', o[1] - t[4], 'burned', o[2] + burn, 'earned', o[3] + cost)
redis.call('DEL', attempt)
return 1
