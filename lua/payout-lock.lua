--[[
  payout-lock: the payout wallet's sender lock, one holder across replicas. Its value is the
  holder's fencing token (random per acquisition): payout-move refuses any other, so a holder whose
  lock lapsed (a pause, a partition) can no longer record or move a payout.
  Includes lib/keys, lib/numbers.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  action: acquire | renew | release
  ARGV[2]  wallet: the payout wallet, lower case
  ARGV[3]  token: the fencing token
  ARGV[4]  ttlMs: time to live, ms (acquire, renew)

  Returns {1} held (acquired, renewed) or released; {0} held by another (or lapsed).
]]

local mode, lock, token = ARGV[1], k_payout_lock(ARGV[2]), ARGV[3]
if mode == 'acquire' then
  if rcall('SET', lock, token, 'NX', 'PX', ARGV[4]) then return { 1 } end
  return { 0 }
end
if rcall('GET', lock) ~= token then return { 0 } end
if mode == 'renew' then
  rcall('PEXPIRE', lock, ARGV[4])
else
  rcall('DEL', lock)
end
return { 1 }
