--[[
  index-offer: the market's indexes of an offer held apart (a market held apart: the offer's hash
  lives under its own tag, written by lua/offer-put.lua there): its place in the offers set and its
  posting order, then its place on the ladder, which follows the offer's own state. A replica that
  stops between the offer's step and this one leaves the ladder behind the offer: the request path
  checks each offer's own state before it reserves (lua/reserve.lua), so that costs a try, never a
  wrong price, and the offer's next change places it again.

  KEYS[1]  offers set
  KEYS[2]  ladder zset
  KEYS[3]  market hash               (offerSeq: the posting order)
  ARGV[1]  mode: list | place
  ARGV[2]  offerId: offer id
  ARGV[3]  standing: place: "1" when the offer stands on the ladder (active), "0" when it does not
  ARGV[4]  score: place: its ladder score (ask x 1e9 + its posting order)

  Returns  list: the offer's posting order (a new one, each time it is listed)
           place: 1
]]
local rcall = redis.call

if ARGV[1] == 'list' then
  rcall('SADD', KEYS[1], ARGV[2])
  return rcall('HINCRBY', KEYS[3], 'offerSeq', 1)
end
if ARGV[3] == '1' then
  rcall('ZADD', KEYS[2], ARGV[4], ARGV[2])
else
  rcall('ZREM', KEYS[2], ARGV[2])
end
return 1
