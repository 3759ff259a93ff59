--[[
  mint-key: a new API key for an account, below the cap of active keys. The count and the write
  are one step, so concurrent mints can never pass the cap.

  KEYS[1]  account hash             (acct:<accountId>, or supplier:<supplierId>)
  KEYS[2]  account's keys hash      (acct:<accountId>:keys, key id -> key digest)
  KEYS[3]  API key hash of the new key (apikey:<digest>); absent in a market held apart, where it
           is on another slot and lua/index-key.lua writes it after
  ARGV[1]  accountId: account id
  ARGV[2]  keyId: key id (UUID)
  ARGV[3]  keyDigest: key digest (SHA-256 hex of the plaintext)
  ARGV[4]  keyName: key name
  ARGV[5]  keyPrefix: key prefix (its first 12 characters)
  ARGV[6]  maxKeys: most active keys an account may hold (10)
  ARGV[7]  limit: the key's spending limit, micro-USDC ("" for none): kept on the account hash as
           limit:<keyId>, beside the key's spent and held (lua/admit.lua enforces it)
  ARGV[8]  owner: the key hash's owner field: accountId (default) or supplierId (a supplier key,
           KEYS[1] being the supplier hash)
  ARGV[9]  callerKeyId: the calling key's id ("" for none: an operator or a supplier). When that key has a
           limit, the new key must have one that fits in what the caller has left (limit - spent
           - held; spent in its current period for a periodic budget), and the caller's limit drops
           by it: a budget handed to an agent binds every key the agent mints, and concurrent mints
           cannot together pass it. Each period of the new key's budget must hold whole periods
           of the caller's, or the new key could spend its limit twice within one of them: a
           daily caller mints daily, weekly, monthly or lifetime limits, a weekly one weekly or
           lifetime ones (a month may start mid-week), a monthly one monthly or lifetime ones,
           a lifetime one lifetime ones.
  ARGV[10] limitReset: the new key's limitReset: daily, weekly or monthly ("" for a lifetime limit, and always
           "" without a limit), kept as reset:<keyId>; its period starts at its first admission
  ARGV[11] table: the value of the account's `table` field (src/redis/keys.ts ACCOUNT_TABLE), set
           if missing: an account made by a build that did not write it at creation becomes a hash
           table here, whose fields every request after finds by their hash (lua/create-account.lua).
           "" for a supplier's hash, which no request reads

  Returns  1 minted
          -1 no such account
          -2 the account is at the cap of active keys
          -4 the key id or digest is already taken (retry with fresh ones)
          -8 the caller is a limited key and the new key's limit is missing, above its remainder,
             or has periods that do not hold whole periods of the caller's
         -10 the caller's key was revoked since its request was authenticated
  A mint also sweeps the marks and budget periods of keys revoked more than ten minutes before, a
  page of the hash at a time (its `sweep` field: where the next page starts); their spent and
  limit stay.
  Times come from Redis TIME, in milliseconds. Includes lib/numbers (a budget period's start).
]]

if rcall('HGET', KEYS[1], 'id') ~= ARGV[1] then return -1 end
if rcall('HLEN', KEYS[2]) >= tonumber(ARGV[6]) then return -2 end
local indexed = #KEYS == 3
if rcall('HEXISTS', KEYS[2], ARGV[2]) == 1 or (indexed and rcall('EXISTS', KEYS[3]) == 1) then return -4 end

local caller = ARGV[9]
local carved = nil
-- A caller revoked since its request was authenticated acts no more: the revoke answered first.
if caller and caller ~= '' and rcall('HEXISTS', KEYS[2], caller) == 0 then return -10 end
if caller and caller ~= '' then
  local c = rcall('HMGET', KEYS[1], 'limit:' .. caller, 'spent:' .. caller, 'held:' .. caller, 'reset:' .. caller,
    'pstart:' .. caller, 'pspent:' .. caller)
  if c[1] then
    if not ARGV[7] or ARGV[7] == '' then return -8 end
    -- The periodic limits a periodic caller may give: those each period of which is whole periods
    -- of its own. Any caller may give a lifetime limit, which never resets; a lifetime caller no other.
    local holds = { daily = { daily = true, weekly = true, monthly = true }, weekly = { weekly = true },
      monthly = { monthly = true } }
    local kinds = c[4] and holds[c[4]]
    if ARGV[10] and ARGV[10] ~= '' and not (kinds and kinds[ARGV[10]]) then return -8 end
    local spent = tonumber(c[2] or '0')
    if c[4] then
      -- What the caller spent in its period: the one last counted, unless it has ended. A clock
      -- behind it still counts in it (a period never rolls back, lib/holds).
      spent = 0
      if c[5] and tonumber(c[5]) >= period_start(c[4], now_ms()) then spent = tonumber(c[6] or '0') end
    end
    local left = tonumber(c[1]) - spent - tonumber(c[3] or '0')
    if tonumber(ARGV[7]) > left then return -8 end
    carved = string.format('%d', tonumber(c[1]) - tonumber(ARGV[7]))
  end
end

local time = rcall('TIME')
local now = time[1] .. string.format('%03d', math.floor(tonumber(time[2]) / 1000))

-- Revoked keys' marks and limits, swept once no replica can still name the key by its ids (it
-- guesses for a minute at most, src/market/key-owners.ts): minting and revoking keys in a loop
-- cannot grow the hash without bound. One page of the hash per mint, from where the last one
-- stopped (its `sweep` field), so a mint's cost does not grow with the hash. What a key spent stays
-- (the audit sums its charges), and so does its limit: a reaped request's late clear may still come
-- (lua/clear.lua), and is charged within it (against the lifetime spent, once its period is gone).
-- A key with requests in flight is left for a later pass. A mark that holds no time (an earlier
-- build's) is given the time now.
local REVOKED_KEPT_MS = 600000
local from = rcall('HGET', KEYS[1], 'sweep') or '0'
local page = rcall('HSCAN', KEYS[1], from, 'MATCH', 'revoked:*', 'COUNT', 100)
if page[1] == '0' then rcall('HDEL', KEYS[1], 'sweep') else rcall('HSET', KEYS[1], 'sweep', page[1]) end
local marks = page[2]
for i = 1, #marks, 2 do
  local id, at = string.sub(marks[i], 9), tonumber(marks[i + 1])
  if not at or at < 1000000000000 then
    rcall('HSET', KEYS[1], marks[i], now)
  elseif tonumber(now) - at >= REVOKED_KEPT_MS then
    local busy = rcall('HMGET', KEYS[1], 'held:' .. id, 'inflight:' .. id)
    if (tonumber(busy[1]) or 0) == 0 and (tonumber(busy[2]) or 0) == 0 then
      rcall('HDEL', KEYS[1], marks[i], 'reset:' .. id, 'pstart:' .. id, 'pspent:' .. id, 'b100:' .. id,
        'held:' .. id, 'inflight:' .. id)
    end
  end
end

rcall('HSET', KEYS[2], ARGV[2], ARGV[3])
local owner = ARGV[8]
if not owner or owner == '' then owner = 'accountId' end
if indexed then
  rcall('HSET', KEYS[3], 'id', ARGV[2], owner, ARGV[1], 'name', ARGV[4], 'prefix', ARGV[5], 'createdAt', now)
end
if ARGV[7] and ARGV[7] ~= '' then rcall('HSET', KEYS[1], 'limit:' .. ARGV[2], ARGV[7]) end
if ARGV[10] and ARGV[10] ~= '' then rcall('HSET', KEYS[1], 'reset:' .. ARGV[2], ARGV[10]) end
if carved then rcall('HSET', KEYS[1], 'limit:' .. caller, carved) end
if ARGV[11] and ARGV[11] ~= '' then rcall('HSETNX', KEYS[1], 'table', ARGV[11]) end
return 1
