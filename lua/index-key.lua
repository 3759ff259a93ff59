--[[
  index-key: the record auth reads for a key minted apart from it (a market held apart:
  lua/create-account.lua or lua/mint-key.lua wrote the key on its owner's slot first). Idempotent
  for the same key; a digest already recorded for another key is refused, and the caller revokes
  the key it just minted.

  KEYS[1]  API key hash of the key  (apikey:<digest>, or supkey:<digest>)
  ARGV[1]  keyId: key id (UUID)
  ARGV[2]  owner: the owner field (accountId or supplierId)
  ARGV[3]  ownerId: the owner's id
  ARGV[4]  keyName: key name
  ARGV[5]  keyPrefix: key prefix

  Returns  1 indexed
          -4 the digest is another key's
  Times come from Redis TIME, in milliseconds.
]]
local rcall = redis.call

local id = rcall('HGET', KEYS[1], 'id')
if id and id ~= ARGV[1] then return -4 end
if id then return 1 end
local time = rcall('TIME')
local now = time[1] .. string.format('%03d', math.floor(tonumber(time[2]) / 1000))
rcall('HSET', KEYS[1], 'id', ARGV[1], ARGV[2], ARGV[3], 'name', ARGV[4], 'prefix', ARGV[5], 'createdAt', now)
return 1
