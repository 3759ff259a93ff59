--[[
  create-account: a new account and its first API key, in one step, so an account never exists
  without a key to reach it and one wallet never holds two accounts. In a market held apart the
  indexes (KEYS[3..5]) are on another slot: this step writes the account's own keys alone, and
  lua/index-account.lua and lua/index-key.lua index it after (src/accounts/accounts.ts).

  KEYS[1]  account hash             (acct:<accountId>)
  KEYS[2]  account's keys hash      (acct:<accountId>:keys, key id -> key digest)
  KEYS[3]  wallets hash             (lower-case wallet -> account id)     } absent when
  KEYS[4]  accounts set                                                  } held apart
  KEYS[5]  API key hash of the first key (apikey:<digest>)              }
  ARGV[1]  accountId: account id
  ARGV[2]  wallet: wallet, checksummed
  ARGV[3]  walletLower: wallet, lower case
  ARGV[4]  maxPriceCents: max price, integer cents
  ARGV[5]  keyId: first key's id (UUID)
  ARGV[6]  keyDigest: first key's digest (SHA-256 hex of the plaintext)
  ARGV[7]  keyName: first key's name
  ARGV[8]  keyPrefix: first key's prefix (its first 12 characters)
  ARGV[9]  table: the value of the account's `table` field (src/redis/keys.ts ACCOUNT_TABLE): longer
           than Redis's hash-max-listpack-value, so the account hash is a hash table from its first
           write, and a field read or written on every request is found by its hash, not by
           walking the fields before it

  Returns  1 created
          -3 the wallet already has an account
          -4 the account id or the key digest is already taken (retry with fresh ones)
  Times come from Redis TIME, in milliseconds, so every replica writes the same clock.
]]
local rcall = redis.call

local indexed = #KEYS == 5
if indexed and rcall('HEXISTS', KEYS[3], ARGV[3]) == 1 then return -3 end
if rcall('EXISTS', KEYS[1]) == 1 or (indexed and rcall('EXISTS', KEYS[5]) == 1) then return -4 end

local time = rcall('TIME')
local now = time[1] .. string.format('%03d', math.floor(tonumber(time[2]) / 1000))

-- The fields every request reads and writes first, the first key's counters with them: where a
-- server's hash-max-listpack-value is above the table field's length, the hash stays a listpack,
-- searched field by field from its start, and each field the hot path touches costs Redis less the
-- nearer the front it is.
rcall('HSET', KEYS[1],
  'confirmed', '0', 'held', '0', 'inflight', '0', 'held:' .. ARGV[5], '0', 'inflight:' .. ARGV[5], '0',
  'spent', '0', 'spent:' .. ARGV[5], '0', 'maxPriceCents', ARGV[4], 'hooks', '0',
  'id', ARGV[1], 'wallet', ARGV[2], 'createdAt', now, 'pending', '0', 'funded', '0', 'writtenOff', '0',
  'table', ARGV[9])
rcall('HSET', KEYS[2], ARGV[5], ARGV[6])
if not indexed then return 1 end
rcall('HSET', KEYS[3], ARGV[3], ARGV[1])
rcall('SADD', KEYS[4], ARGV[1])
rcall('HSET', KEYS[5],
  'id', ARGV[5], 'accountId', ARGV[1], 'name', ARGV[7], 'prefix', ARGV[8], 'createdAt', now)
return 1
