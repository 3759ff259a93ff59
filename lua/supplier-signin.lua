--[[
  supplier-signin: a verified Sign-In with Ethereum becomes a supplier key. The nonce is used up,
  the wallet's supplier found or created, and a key minted under the cap, in one step: a nonce
  signs in once, a wallet has one supplier, and concurrent sign-ins never pass the cap. A refusal
  changes nothing (the nonce stays usable until it expires).
  Includes lib/keys, lib/numbers.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  nonce: nonce (from GET /v1/supplier/nonce)
  ARGV[2]  wallet: wallet, checksummed
  ARGV[3]  walletLower: wallet, lower case (the supplierWallets field)
  ARGV[4]  supplierId: a fresh supplier id, used when the wallet has no supplier yet
  ARGV[5]  keyId: key id (UUID)
  ARGV[6]  keyDigest: key digest (SHA-256 hex of the plaintext)
  ARGV[7]  keyPrefix: key prefix (its first 12 characters)
  ARGV[8]  keyName: key name
  ARGV[9]  maxKeys: most active keys a supplier may hold (10)

  A key minted here is marked `signin` with the supplier's count of sign-ins: at the cap, a sign-in replaces the oldest such key (a
  person who signs in from the page and closes the tab is never locked out), and never one the
  supplier minted by name.

  Returns {1, supplierId, created (1|0), replaced key id or ''} or
    {-1}  the nonce is unknown, expired or used
    {-2}  the supplier is at the cap of active keys, none of them minted by a sign-in
    {-4}  the key id, key digest or fresh supplier id is taken (retry with fresh ones)
]]

local nonce_key = k_siwe_nonce(ARGV[1])
if rcall('EXISTS', nonce_key) == 0 then return { -1 } end
local id = rcall('HGET', K_SUPPLIER_WALLETS, ARGV[3])
local created = 0
local replaced, replaced_digest = '', nil
if id then
  if rcall('HLEN', k_supplier_keys(id)) >= int(ARGV[9]) then
    local oldest
    local held = rcall('HGETALL', k_supplier_keys(id))
    for i = 1, #held, 2 do
      local order = tonumber(rcall('HGET', k_supkey(held[i + 1]), 'signin'))
      if order and (not oldest or order < oldest) then
        oldest, replaced, replaced_digest = order, held[i], held[i + 1]
      end
    end
    if not oldest then return { -2 } end
  end
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
if replaced_digest then
  rcall('DEL', k_supkey(replaced_digest))
  rcall('HDEL', keys_of, replaced)
end
rcall('HSET', keys_of, ARGV[5], ARGV[6])
local order = rcall('HINCRBY', k_supplier(id), 'signins', 1)
rcall('HSET', key, 'id', ARGV[5], 'supplierId', id, 'name', ARGV[8], 'prefix', ARGV[7], 'createdAt', now,
  'signin', order)
return { 1, id, created, replaced }
