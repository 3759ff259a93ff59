--[[
  set-key-limit: change an active key's spending limit and/or name. Only if the key id is this
  account's and still maps to the digest the caller read (as revoke-key), so a foreign or revoked
  id changes nothing. A limit below what the key already spent plus what it holds in flight is
  refused: the limit would be passed at once, and the audit's "never above its limit" would no
  longer say anything.

  KEYS[1]  account hash             (acct:<accountId>: limit:<keyId>, spent:<keyId>, held:<keyId>)
  KEYS[2]  account's keys hash      (acct:<accountId>:keys, key id -> key digest)
  KEYS[3]  API key hash of the key  (apikey:<digest>)
  ARGV[1]  key id (UUID)
  ARGV[2]  key digest, as read from KEYS[2]
  ARGV[3]  the new limit, micro-USDC; "none" removes it; "" leaves it
  ARGV[4]  the new name; "" leaves it
  ARGV[5]  the calling key's id ("" for none). When that key has a limit, it may only lower the
           limit of a key that has one: never raise or remove a limit (the budget stays binding),
           and never touch a key without one (that would leave no key that can lift a limit).

  Returns {1, limit ("" none), spent, held}
          {-5}                 no such key on this account (unknown, foreign, or revoked)
          {-7, spent + held}   the limit is below what the key spent and holds
          {-8}                 the caller is a limited key, and the key has no limit or the
                               change would raise or remove its limit
]]
local rcall = redis.call

if rcall('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return { -5 } end
local f_limit, f_spent, f_held = 'limit:' .. ARGV[1], 'spent:' .. ARGV[1], 'held:' .. ARGV[1]
local k = rcall('HMGET', KEYS[1], f_limit, f_spent, f_held)
local spent, held = tonumber(k[2] or '0'), tonumber(k[3] or '0')
local limit = k[1] or ''
if ARGV[5] and ARGV[5] ~= '' and rcall('HEXISTS', KEYS[1], 'limit:' .. ARGV[5]) == 1 then
  if limit == '' or ARGV[3] == 'none' or (ARGV[3] ~= '' and tonumber(ARGV[3]) > tonumber(limit)) then
    return { -8 }
  end
end
if ARGV[3] == 'none' then
  limit = ''
elseif ARGV[3] ~= '' then
  if tonumber(ARGV[3]) < spent + held then return { -7, string.format('%d', spent + held) } end
  limit = ARGV[3]
end
if ARGV[4] ~= '' then rcall('HSET', KEYS[3], 'name', ARGV[4]) end
if limit == '' then rcall('HDEL', KEYS[1], f_limit) else rcall('HSET', KEYS[1], f_limit, limit) end
return { 1, limit, string.format('%d', spent), string.format('%d', held) }
