--[[
  quote: the no-wait select of POST /v1/video/quote: the ask the router would clear a job at right
  now, for the account's max price. Nothing is held and nothing waits.
  Includes lib/keys, lib/numbers, lib/ladder, lib/offers, lib/pick.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  accountId: account id
  ARGV[2]  holdDiem: the hold, micro-DIEM (the request's worst case)
  ARGV[3]  defaultMaxPriceCents: default max price, cents (when the account has none set)

  Returns {1, askCents} or admit's refusals: {-1} unknown account, {-4}, {-5, ...}, {-6, ...},
  {-7} every eligible supplier key is in flight (keys_busy), {-8}.
]]
local account = k_account(ARGV[1])
if rcall('EXISTS', account) == 0 then return { -1 } end
local max_cents = int(rcall('HGET', account, 'maxPriceCents'))
if max_cents == 0 then max_cents = int(ARGV[3]) end
local chosen, refusal = pick_offer(max_cents, int(ARGV[2]), {}, now_ms())
if not chosen then return refusal end
return { 1, chosen.ask }
