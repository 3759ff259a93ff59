-- lib/slot-guard: what every script runs first on a Cluster, before any write (a single server,
-- which never splits a slot, loads the scripts without it: src/redis/functions.ts). While a Redis
-- Cluster moves the slot of KEYS[1] to another master (CLUSTER SETSLOT MIGRATING on the source,
-- IMPORTING on the target reached by ASK), each side holds only part of the slot's keys, and a script reads and
-- writes more keys than it declares (lib/keys builds them from the base): run there, it would
-- read an account or attempt as missing, or stop at its first key on the other side after writing
-- some. Two keys that never exist are asked about together: Redis answers that here only while
-- the slot is whole here (a missing key of a migrating slot is elsewhere, and a command of several
-- keys on an importing slot is refused while any is missing). Otherwise the script writes nothing
-- and answers TRYAGAIN, which the Cluster client retries, as it retries a multi-key command. A
-- call without keys is bound to no slot.
if KEYS[1] and type(redis.pcall('EXISTS', KEYS[1] .. '\0slot-guard:a', KEYS[1] .. '\0slot-guard:b')) == 'table' then
  return redis.error_reply('TRYAGAIN the slot of this script is being moved between Cluster nodes')
end
