--[[
  credit: add funds to an account by hand (operator), with its audit entry written in the same
  step, so no credit exists without its record. Confirmed and funded grow together, which keeps
  funded = confirmed + pending + held + spent.

  KEYS[1]  account hash             (acct:<accountId>)
  KEYS[2]  audit stream
  KEYS[3]  the credit's Idempotency-Key record (acct:<accountId>:credit-key:<digest>; untouched
           without one)
  ARGV[1]  accountId: account id
  ARGV[2]  amount: amount, integer micro-USDC, positive
  ARGV[3]  maxAmount: the largest amount one credit may add, integer micro-USDC
  ARGV[4]  note: note (free text, may be empty)
  ARGV[5]  actor: actor (who credited: admin-api, cli ...)
  ARGV[6]  table: the value of the account's `table` field (src/redis/keys.ts ACCOUNT_TABLE), set
           if missing: an account made by a build that did not write it at creation becomes a hash
           table here, whose fields every request after finds by their hash (lua/create-account.lua)
  ARGV[7]  idempotencyDigest: the SHA-256 hex of the operator's Idempotency-Key ("" for none): a
           credit retried with it (its reply lost) adds nothing again and answers as the first did

  Returns  { 1, confirmed, pending, held, spent, funded, writtenOff, audit entry id }
           (balances after the credit, integer micro-USDC strings)
           { 2, ... } the same, for a credit of this Idempotency-Key made before: balances now, its
           audit entry id
           { -1 } no such account
           { -6 } the amount is not a positive integer up to ARGV[3]
           { -11 } the Idempotency-Key was used for a credit of another amount
]]
local rcall = redis.call

if rcall('HGET', KEYS[1], 'id') ~= ARGV[1] then return { -1 } end
local amount = ARGV[2]
-- Digits only, no leading zero, at most 15 digits: exact as a Lua number for the cap check.
if not string.match(amount, '^[1-9]%d*$') or #amount > 15 or tonumber(amount) > tonumber(ARGV[3]) then
  return { -6 }
end

local keyed = ARGV[7] ~= nil and ARGV[7] ~= ''
if keyed then
  -- Kept for ever, as the credit is: a key that expired would let a late retry credit twice.
  local before = rcall('GET', KEYS[3])
  if before then
    local was_amount, was_entry = string.match(before, '^(%d+) (.+)$')
    if was_amount ~= amount then return { -11 } end
    local b = rcall('HMGET', KEYS[1], 'confirmed', 'pending', 'held', 'spent', 'funded', 'writtenOff')
    return { 2, b[1], b[2], b[3], b[4], b[5], b[6], was_entry }
  end
end

rcall('HSETNX', KEYS[1], 'table', ARGV[6])
rcall('HINCRBY', KEYS[1], 'confirmed', amount)
rcall('HINCRBY', KEYS[1], 'funded', amount)
local b = rcall('HMGET', KEYS[1], 'confirmed', 'pending', 'held', 'spent', 'funded', 'writtenOff')

local time = rcall('TIME')
local now = time[1] .. string.format('%03d', math.floor(tonumber(time[2]) / 1000))
local entry = rcall('XADD', KEYS[2], '*',
  'action', 'credit', 'accountId', ARGV[1], 'amountMicroUsdc', amount, 'note', ARGV[4],
  'actor', ARGV[5], 'confirmedAfter', b[1], 'fundedAfter', b[5], 'at', now)
if keyed then rcall('SET', KEYS[3], amount .. ' ' .. entry) end
return { 1, b[1], b[2], b[3], b[4], b[5], b[6], entry }
