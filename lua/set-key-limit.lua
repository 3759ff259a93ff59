--[[
  set-key-limit: change an active key's spending limit, its limitReset and/or name. Only if the key
  id is this account's and still maps to the digest the caller read (as revoke-key), so a foreign
  or revoked id changes nothing. A limit below what the key already spent (in its current period,
  for a periodic budget) plus what it holds in flight is refused: the limit would be passed at
  once, and the audit's "never above its limit" would no longer say anything.

  KEYS[1]  account hash             (acct:<accountId>: limit:<keyId>, spent:<keyId>, held:<keyId>,
                                     and for a periodic budget reset:, pstart:, pspent:<keyId>)
  KEYS[2]  account's keys hash      (acct:<accountId>:keys, key id -> key digest)
  KEYS[3]  API key hash of the key  (apikey:<digest>), for a new name; absent in a market held
           apart, where it is on another slot and the caller renames it after
  ARGV[1]  keyId: key id (UUID)
  ARGV[2]  keyDigest: key digest, as read from KEYS[2]
  ARGV[3]  limit: the new limit, micro-USDC; "none" removes it (and its limitReset); "" leaves it
  ARGV[4]  name: the new name; "" leaves it
  ARGV[5]  callerKeyId: the calling key's id ("" for none). When that key has a limit, it may only lower the
           limit of a key that has one: never raise or remove a limit, nor change how often it
           resets (the budget stays binding), and never touch a key without one (that would leave
           no key that can lift a limit).
  ARGV[6]  limitReset: the new limitReset: daily, weekly or monthly; "none" makes the limit a lifetime one;
           "" leaves it. A budget that changes its period counts what the key spent in the period
           it had as spent in the new one (from lifetime: nothing); a request in flight counts in
           the new one when it clears, as it was admitted within it (lib/numbers in_period).
  ARGV[7]  now: the time now, ms ("": Redis TIME, as the gateway always sends): a test sets it to
           stand where the requests in flight it admitted stand

  Returns {1, limit ("" none), spent, held, limitReset ("" lifetime or none), periodSpent,
           periodStart ("" none)}
          {-5}                 no such key on this account (unknown, foreign, or revoked)
          {-7, spent + held}   the limit is below what the key spent and holds
          {-8}                 the caller is a limited key, and the key has no limit or the
                               change would raise or remove its limit or change its limitReset
          {-9}                 a limitReset for a key left without a limit
          {-10}                the caller's key was revoked since its request was authenticated
  Includes lib/numbers (a budget period's start, from Redis TIME).
]]

if rcall('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return { -5 } end
-- A caller revoked since its request was authenticated acts no more: the revoke answered first.
if ARGV[5] and ARGV[5] ~= '' and rcall('HEXISTS', KEYS[2], ARGV[5]) == 0 then return { -10 } end
local id = ARGV[1]
local f_limit, f_spent, f_held = 'limit:' .. id, 'spent:' .. id, 'held:' .. id
local f_reset, f_pstart, f_pspent = 'reset:' .. id, 'pstart:' .. id, 'pspent:' .. id
local k = rcall('HMGET', KEYS[1], f_limit, f_spent, f_held, f_reset, f_pstart, f_pspent)
local spent, held = number(k[2] or '0'), number(k[3] or '0')
local limit, reset = k[1] or '', k[4] or ''
local new_reset = reset
if ARGV[6] == 'none' or ARGV[3] == 'none' then
  new_reset = ''
elseif ARGV[6] ~= '' then
  new_reset = ARGV[6]
end
if ARGV[3] == 'none' and ARGV[6] ~= '' and ARGV[6] ~= 'none' then return { -9 } end
if ARGV[5] and ARGV[5] ~= '' and rcall('HEXISTS', KEYS[1], 'limit:' .. ARGV[5]) == 1 then
  if limit == '' or ARGV[3] == 'none' or (ARGV[3] ~= '' and number(ARGV[3]) > number(limit))
      or new_reset ~= reset then
    return { -8 }
  end
end
if ARGV[3] == 'none' then
  limit = ''
elseif ARGV[3] ~= '' then
  limit = ARGV[3]
end
if limit == '' and new_reset ~= '' then return { -9 } end

-- What the key spent in the period it has now (0 once that period ended), carried into the new one.
local period_spent, period = 0, ''
if new_reset ~= '' then
  local now = ARGV[7] ~= '' and number(ARGV[7]) or now_ms()
  local start = period_start(new_reset, now)
  if reset ~= '' then
    -- As admit (lib/holds check_hold): a clock behind the period last counted counts in that one;
    -- a period never rolls back, so its spent is never forgotten.
    local current = period_start(reset, now)
    if k[5] and number(k[5]) > current then current = number(k[5]) end
    if k[5] == format('%d', current) then period_spent = number(k[6]) end
    if new_reset == reset then start = current end
  end
  period = format('%d', start)
end
if limit ~= '' and (ARGV[3] ~= '' or new_reset ~= reset) then
  local used = (new_reset ~= '' and period_spent or spent) + held
  if number(limit) < used then return { -7, format('%d', used) } end
end

if ARGV[4] ~= '' and #KEYS == 3 then rcall('HSET', KEYS[3], 'name', ARGV[4]) end
if limit == '' then rcall('HDEL', KEYS[1], f_limit) else rcall('HSET', KEYS[1], f_limit, limit) end
-- A changed limit is a new budget: its key.budget.100 may be written again (lib/events). The
-- same limit set again is not, or a key could ask for its own alert once more.
-- So is a new period written here (the one last counted had ended): as admit's roll (lib/holds).
if limit ~= (k[1] or '') or new_reset ~= reset or (new_reset ~= '' and k[5] ~= period) then
  rcall('HDEL', KEYS[1], 'b100:' .. ARGV[1])
end
if new_reset == '' then
  rcall('HDEL', KEYS[1], f_reset, f_pstart, f_pspent)
else
  rcall('HSET', KEYS[1], f_reset, new_reset, f_pstart, period, f_pspent, format('%d', period_spent))
end
return { 1, limit, format('%d', spent), format('%d', held), new_reset, format('%d', period_spent), period }
