--[[
  supplier-signin: a verified Sign-In with Ethereum becomes a supplier key. The nonce is used up,
  the wallet's supplier found or created, and a key minted under the cap, in one step: a nonce
  signs in once, a wallet has one supplier, and concurrent sign-ins never pass the cap. A refusal
  changes nothing (the nonce stays usable until it expires).
  Includes lib/keys, lib/numbers.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  nonce (from GET /v1/supplier/nonce)
  ARGV[2]  wallet, checksummed
  ARGV[3]  wallet, lower case (the supplierWallets field)
  ARGV[4]  a fresh supplier id, used when the wallet has no supplier yet
  ARGV[5]  key id (UUID)
  ARGV[6]  key digest (SHA-256 hex of the plaintext)
  ARGV[7]  key prefix (its first 12 characters)
  ARGV[8]  key name
  ARGV[9]  most active keys a supplier may hold (10)

  Returns {1, supplierId, created (1|0)} or
    {-1}  the nonce is unknown, expired or used
    {-2}  the supplier is at the cap of active keys
    {-4}  the key id, key digest or fresh supplier id is taken (retry with fresh ones)
]]

local nonce_key = k_siwe_nonce(ARGV[1])
if rcall('EXISTS', nonce_key) == 0 then return { -1 } end
local id = rcall('HGET', K_SUPPLIER_WALLETS, ARGV[3])
local created = 0
if id then
  if rcall('HLEN', k_supplier_keys(id)) >= int(ARGV[9]) then return { -2 } end
else
  id = ARGV[4]
  if rcall('EXISTS', k_supplier(id)) == 1 then return { -4 } end
  created = 1
end
local keys_of = k_supplier_keys(id)
local key = k_supkey(ARGV[6])
if rcall('HEXISTS', keys_of, ARGV[5]) == 1 or rcall('EXISTS', key) == 1 then return { -4 } end

local now = s(now_ms())
rcall('DEL', nonce_key)
if created == 1 then
  rcall('HSET', k_supplier(id), 'id', id, 'wallet', ARGV[2], 'status', 'active', 'createdAt', now,
    'paidOut', '0', 'pending', '0')
  rcall('SADD', K_SUPPLIERS, id)
  rcall('HSET', K_SUPPLIER_WALLETS, ARGV[3], id)
end
rcall('HSET', keys_of, ARGV[5], ARGV[6])
rcall('HSET', key, 'id', ARGV[5], 'supplierId', id, 'name', ARGV[8], 'prefix', ARGV[7], 'createdAt', now)
return { 1, id, created }
