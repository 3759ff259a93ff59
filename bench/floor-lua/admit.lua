-- The floor of an admission (bench only, never run by the gateway): the least any admit that holds
-- money in Redis must do. Read the buyer's balance, the cheapest offer and its capacity; hold on
-- both sides; remember the hold for the clear. No caps, lease, reaping, replay check or record.
-- KEYS[1] keyspace base; ARGV: attempt id, account id, hold (micro-DIEM).
local base = KEYS[1]
local account = base .. 'floor:acct:' .. ARGV[2]
local a = redis.call('HMGET', account, 'confirmed', 'held')
local offer_id = redis.call('ZRANGEBYSCORE', base .. 'floor:ladder', '-inf', '+inf', 'LIMIT', 0, 1)[1]
local offer = base .. 'floor:offer:' .. offer_id
local o = redis.call('HMGET', offer, 'posted', 'held', 'burned')
local hold_diem = tonumber(ARGV[3])
local hold = math.ceil(hold_diem * 50 / 100)
if tonumber(a[1]) < hold or o[1] - o[2] - o[3] < hold_diem then return 0 end
redis.call('HSET', account, 'confirmed', a[1] - hold, 'held', a[2] + hold)
redis.call('HSET', offer, 'held', o[2] + hold_diem)
redis.call('HSET', base .. 'floor:attempt:' .. ARGV[1], 'account', ARGV[2], 'offer', offer_id,
  'hold', hold, 'holdDiem', hold_diem)
return 1
