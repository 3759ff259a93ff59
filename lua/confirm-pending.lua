--[[
  confirm-pending: the account's side of confirming a payment in a market held apart (before
  lua/confirm-payment.lua marks the payment on the indexes' slot): its amount moves from pending to
  confirmed, once per payment, and funding.confirmed is written to the account's event stream in
  the same call when one of its endpoints subscribes (lib/events).
  Includes lib/keys, lib/numbers, lib/events.

  KEYS[1]  the account's keyspace base
  ARGV[1]  accountId: account id
  ARGV[2]  paymentId: payment id
  ARGV[3]  amount: amount, integer micro-USDC, as the payment's record says

  Returns  { 1, confirmed, pending } confirmed; balances after, integer micro-USDC strings
           { 0 }                     this payment was confirmed on the account already
           { -1 }                    no such account, or the payment was never credited to it
           { -7 }                    pending is below the amount (never driven negative; left for the audit)
]]
local account, payments = k_account(ARGV[1]), k_account_payments(ARGV[1])
if rcall('HGET', account, 'id') ~= ARGV[1] then return { -1 } end
local state = rcall('HGET', payments, ARGV[2])
if state == 'confirmed' then return { 0 } end
if state ~= 'pending' then return { -1 } end
local amount = int(ARGV[3])
if int(rcall('HGET', account, 'pending')) < amount then return { -7 } end

rcall('HINCRBY', account, 'pending', s(-amount))
rcall('HINCRBY', account, 'confirmed', s(amount))
rcall('HSET', payments, ARGV[2], 'confirmed')
local confirmed = rcall('HGET', account, 'confirmed')
emit_event('acct:' .. ARGV[1], 'funding.confirmed', now_ms(),
  { paymentId = ARGV[2], amountUsdc = usdc(amount), confirmedUsdc = usdc(int(confirmed)) })
return { 1, confirmed, rcall('HGET', account, 'pending') }
