--[[
  revoke-key: an account's key stops working at once. The lookup hash (what auth reads), the
  account's entry and a mark on the owner's hash (revoked:<keyId> = when, ms; what an admission by
  the key's ids reads) go together, and only if the key id is this account's and still maps to the
  digest the caller read, so a foreign or already revoked id changes nothing.

  KEYS[1]  account's keys hash      (acct:<accountId>:keys, key id -> key digest)
  KEYS[2]  account hash             (acct:<accountId>: limit:<keyId>; a supplier's hash for its keys)
  KEYS[3]  API key hash of the key  (apikey:<digest>); absent in a market held apart, where it is on
           another slot and the caller deletes it first (the key stops working before it is unlisted)
  ARGV[1]  keyId: key id (UUID)
  ARGV[2]  keyDigest: key digest, as read from KEYS[1]
  ARGV[3]  callerKeyId: the calling key's id ("" for none). A limited caller may not revoke a key without a
           limit: revoking the account's unlimited keys would leave no key that can lift a limit.

  Returns  1 revoked
          -5 no such key on this account (unknown, foreign, or revoked meanwhile)
          -8 the caller is a limited key and the key has no limit
         -10 the caller's key was revoked since its request was authenticated
]]
local rcall = redis.call

if rcall('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return -5 end
local caller = ARGV[3]
-- A caller revoked since its request was authenticated acts no more: the revoke answered first.
if caller and caller ~= '' and rcall('HEXISTS', KEYS[1], caller) == 0 then return -10 end
if caller and caller ~= '' and rcall('HEXISTS', KEYS[2], 'limit:' .. caller) == 1
    and rcall('HEXISTS', KEYS[2], 'limit:' .. ARGV[1]) == 0 then
  return -8
end
if #KEYS == 3 then rcall('DEL', KEYS[3]) end
rcall('HDEL', KEYS[1], ARGV[1])
-- Marked on its owner's hash, which every admission reads: a replica that resolved the key before
-- and names it by its ids (src/market/key-owners.ts) is refused from now on, as a lookup by digest is.
-- The mark holds when (Redis TIME, ms): lua/mint-key.lua sweeps it once no replica can still guess.
local time = rcall('TIME')
local now = time[1] .. string.format('%03d', math.floor(tonumber(time[2]) / 1000))
rcall('HSET', KEYS[2], 'revoked:' .. ARGV[1], now)
return 1
