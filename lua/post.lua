--[[
  post: the offer's side of clears whose accounts were charged apart (lua/clear.lua with
  offerApart), one or several at a time: each reservation posts what its account's side billed
  (lib/posts), each offer's row read and written once. Idempotent by attempt id: a posted
  reservation is left as it is.
  Includes lib/keys, lib/numbers, lib/ladder, lib/record, lib/attempts, lib/posts.

  KEYS[1]  the offer's keyspace base
  ARGV[1]  recordRetentionMs: how long the supplier's fill and the posted reservation are kept, ms
  ARGV[2]  offerId: the offer whose reservations these are (what a lost one is posted on)
  ARGV[3..] each post's attemptId, burn (the billed burn, micro-DIEM: clear's reply), earned (what
           the supplier earns, micro-USDC: charged less the fee), fee (the platform's, micro-USDC),
           disputed (burn reported beyond what was billed, micro-DIEM), upstreamBalance (the
           supplier key's upstream balance after, micro-DIEM; "" unknown), balanceDay (the UTC day
           it holds on, as lua/clear.lua answered it; "" with no balance: recorded with the balance,
           which is left out when that day is over), askCents (the clear's ask), model (for the fill),
           upstreamGen (the offer's upstream generation its reservation answered; "" not known: the
           balance is recorded only when it is still the offer's, lua/offer-put.lua), clearedAt (the
           clear's time, ms, as lua/clear.lua answered it; "" not known: the post's time): a fill
           posted in a later UTC hour than its clear records it, and counts at it

  Returns each post's code, in order: 1 posted; 2 posted, the reservation lost (a failover) and
  written from the post; 0 already posted; -1 no such reservation, nor offer.
]]
keep_records_for(ARGV[1])
local now = now_ms()
local batch = {}
local codes = post_all(ARGV, 3, now, batch, ARGV[2])
write_batch(batch, now)
return codes
