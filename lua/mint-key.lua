--[[
  mint-key: a new API key for an account, below the cap of active keys. The count and the write
  are one step, so concurrent mints can never pass the cap.

  KEYS[1]  account hash             (acct:<accountId>, or supplier:<supplierId>)
  KEYS[2]  account's keys hash      (acct:<accountId>:keys, key id -> key digest)
  KEYS[3]  API key hash of the new key (apikey:<digest>)
  ARGV[1]  account id
  ARGV[2]  key id (UUID)
  ARGV[3]  key digest (SHA-256 hex of the plaintext)
  ARGV[4]  key name
  ARGV[5]  key prefix (its first 12 characters)
  ARGV[6]  most active keys an account may hold (10)
  ARGV[7]  the key's spending limit, micro-USDC ("" for none): kept on the account hash as
           limit:<keyId>, beside the key's spent and held (lua/admit.lua enforces it)
  ARGV[8]  the key hash's owner field: accountId (default) or supplierId (a supplier key,
           KEYS[1] being the supplier hash)
  ARGV[9]  the calling key's id ("" for none: an operator or a supplier). When that key has a
           limit, the new key must have one that fits in what the caller has left (limit - spent
           - held), and the caller's limit drops by it: a budget handed to an agent binds every key
           the agent mints, and concurrent mints cannot together pass it.

  Returns  1 minted
          -1 no such account
          -2 the account is at the cap of active keys
          -4 the key id or digest is already taken (retry with fresh ones)
          -8 the caller is a limited key and the new key's limit is missing or above its remainder
  Times come from Redis TIME, in milliseconds.
]]
local rcall = redis.call

if rcall('HGET', KEYS[1], 'id') ~= ARGV[1] then return -1 end
if rcall('HLEN', KEYS[2]) >= tonumber(ARGV[6]) then return -2 end
if rcall('HEXISTS', KEYS[2], ARGV[2]) == 1 or rcall('EXISTS', KEYS[3]) == 1 then return -4 end

local caller = ARGV[9]
local carved = nil
if caller and caller ~= '' then
  local c = rcall('HMGET', KEYS[1], 'limit:' .. caller, 'spent:' .. caller, 'held:' .. caller)
  if c[1] then
    if not ARGV[7] or ARGV[7] == '' then return -8 end
    local left = tonumber(c[1]) - tonumber(c[2] or '0') - tonumber(c[3] or '0')
    if tonumber(ARGV[7]) > left then return -8 end
    carved = string.format('%d', tonumber(c[1]) - tonumber(ARGV[7]))
  end
end

local time = rcall('TIME')
local now = time[1] .. string.format('%03d', math.floor(tonumber(time[2]) / 1000))

rcall('HSET', KEYS[2], ARGV[2], ARGV[3])
local owner = ARGV[8]
if not owner or owner == '' then owner = 'accountId' end
rcall('HSET', KEYS[3],
  'id', ARGV[2], owner, ARGV[1], 'name', ARGV[4], 'prefix', ARGV[5], 'createdAt', now)
if ARGV[7] and ARGV[7] ~= '' then rcall('HSET', KEYS[1], 'limit:' .. ARGV[2], ARGV[7]) end
if carved then rcall('HSET', KEYS[1], 'limit:' .. caller, carved) end
return 1
