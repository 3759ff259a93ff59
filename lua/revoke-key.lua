--[[
  revoke-key: an account's key stops working at once. The lookup hash (what auth reads) and the
  account's entry go together, and only if the key id is this account's and still maps to the
  digest the caller read, so a foreign or already revoked id changes nothing.

  KEYS[1]  account's keys hash      (acct:<accountId>:keys, key id -> key digest)
  KEYS[2]  API key hash of the key  (apikey:<digest>)
  ARGV[1]  key id (UUID)
  ARGV[2]  key digest, as read from KEYS[1]

  Returns  1 revoked
          -5 no such key on this account (unknown, foreign, or revoked meanwhile)
]]
local rcall = redis.call

if rcall('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return -5 end
rcall('DEL', KEYS[2])
rcall('HDEL', KEYS[1], ARGV[1])
return 1
