--[[
  due: the reservations on an offer's slot whose lease has run out, by the clock of the master that
  wrote their deadlines (lua/reserve.lua, lua/renew.lua), not another master's: the caller finishes
  each from its account's side (src/market/two-phase.ts reapOffer).
  Includes lib/keys, lib/numbers.

  KEYS[1]  the offer's keyspace base
  ARGV[1]  limit: at most this many

  Returns the attempt ids, the earliest deadline first.
]]
return rcall('ZRANGEBYSCORE', K_LEASES, '-inf', stamp(now_ms()), 'LIMIT', '0', s(int(ARGV[1])))
