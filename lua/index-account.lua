--[[
  index-account: the market's indexes of an account created apart from them (a market held apart:
  lua/create-account.lua wrote the account on its own slot first): its wallet and its place in the
  accounts set. Idempotent for the same account; a wallet indexed to another account is refused,
  and the caller drops the account it just wrote.

  KEYS[1]  wallets hash             (lower-case wallet -> account id)
  KEYS[2]  accounts set
  ARGV[1]  accountId: account id
  ARGV[2]  walletLower: wallet, lower case

  Returns  1 indexed
          -3 the wallet already has another account
]]
local rcall = redis.call

local owner = rcall('HGET', KEYS[1], ARGV[2])
if owner and owner ~= ARGV[1] then return -3 end
rcall('HSET', KEYS[1], ARGV[2], ARGV[1])
rcall('SADD', KEYS[2], ARGV[1])
return 1
