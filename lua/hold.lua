--[[
  hold: the account's side of an admission whose offer was reserved apart (lua/reserve.lua, on the
  offer's own slot): the same checks and the same hold as admit's, at the reserved offer's ask.
  Nothing here reads or writes the offer; a refusal leaves the caller to void the reservation.
  Includes lib/keys, lib/numbers, lib/record, lib/holds.

  KEYS[1]  the account's keyspace base
  ARGV[1]  attemptId: attempt id (the reservation's)
  ARGV[2]  accountId: account id (the caller resolved the key's digest to it: the key's own hash is
           not on the account's slot)
  ARGV[3]  apiKeyId: API key id
  ARGV[4]  apiKeyDigest: the API key's SHA-256 digest, checked against the account's active keys
           (a key revoked since the caller resolved it is refused, {-11}); "" to skip the check
  ARGV[5]  holdDiem: the hold, micro-DIEM: the request's worst case
  ARGV[6]  keyCap: per-key in-flight cap
  ARGV[7]  accountCap: per-account in-flight cap
  ARGV[8]  capGroup: cap group ("" for none)
  ARGV[9]  capGroupCap: the cap group's cap
  ARGV[10] offerId: the offer reserved
  ARGV[11] askCents: its ask, as the reservation found it
  ARGV[12] defaultMaxPriceCents: default max price, cents (when the account has none set)
  ARGV[13] model: model id (kept on the attempt)
  ARGV[14] requestId: request id (kept on the attempt)
  ARGV[15] tried: offer ids this request already tried, comma-separated ("" for none)
  ARGV[16] now: the time now, ms ("": Redis TIME)

  Every reply but {-11} ends with the account id and the API key id it was made for.
  Returns {1, holdUsdc, confirmedAfter} or admit's refusals: {-1}, {-2}, {-3}, {-9, ...}, {-10},
  {-11}, {-12, ...}, and {-5, maxCents, askCents, "0"} when the ask is above the account's max.
]]
local attempt_id, hold_diem, ask = ARGV[1], int(ARGV[5]), int(ARGV[11])
local now = ARGV[16] ~= '' and int(ARGV[16]) or now_ms()
local group = ARGV[8]
if ARGV[4] ~= '' and rcall('HGET', k_account_keys(ARGV[2]), ARGV[3]) ~= ARGV[4] then return { -11 } end
local max_cents, refusal = open_hold(attempt_id, ARGV[2], ARGV[3], '', int(ARGV[6]), int(ARGV[7]), group,
  int(ARGV[9]), now)
local reply = owned
if refusal then return reply(refusal) end
if max_cents == 0 then max_cents = int(ARGV[12]) end
if ask > max_cents then return reply({ -5, s(max_cents), ask, '0' }) end
local hold
hold, refusal = check_hold(ask, hold_diem, now)
if not hold then return reply(refusal) end
local hold_s = s(hold)
-- The attempt first: an id used before writes nothing.
if not write_attempt(attempt_id, ARGV[10], ask, hold_s, s(hold_diem), ARGV[13], ARGV[14], now, ARGV[15], group) then
  return reply({ -10 })
end
local confirmed_s = write_hold(hold)
return reply({ 1, hold_s, confirmed_s })
