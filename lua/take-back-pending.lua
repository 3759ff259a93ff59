--[[
  take-back-pending: the account's side of taking back a pending payment in a market held apart,
  before lua/take-back-payment.lua drops its records on the indexes' slot: pending and funded
  shrink by its amount, once per payment, and the account's payments hash keeps it as `taken back`,
  so a late credit of it (lua/credit-pending.lua) finds it there and credits nothing. A payment
  the account never listed (its credit's account step had not run) is kept as `taken back` alone.
  A balance that shrinks writes funding.reversed to the account's event stream in the same call
  when one of its endpoints subscribes (lib/events).
  Includes lib/keys, lib/numbers, lib/events.

  KEYS[1]  the account's keyspace base
  ARGV[1]  accountId: account id
  ARGV[2]  paymentId: payment id
  ARGV[3]  amount: amount, integer micro-USDC, as the payment's record says

  Returns  { 1 }   taken back
           { 0 }   taken back before
           { -1 }  no such account, or the payment is confirmed or moved on it
           { -7 }  pending is below the amount (never driven negative; left for the audit)
]]
local account, payments = k_account(ARGV[1]), k_account_payments(ARGV[1])
if rcall('HGET', account, 'id') ~= ARGV[1] then return { -1 } end
local state = rcall('HGET', payments, ARGV[2])
if state == 'taken back' then return { 0 } end
if state and state ~= 'pending' then return { -1 } end
local amount = int(ARGV[3])
if state == 'pending' and int(rcall('HGET', account, 'pending')) < amount then return { -7 } end
rcall('HSET', payments, ARGV[2], 'taken back')
if state ~= 'pending' then return { 1 } end
rcall('HINCRBY', account, 'pending', s(-amount))
rcall('HINCRBY', account, 'funded', s(-amount))
emit_event('acct:' .. ARGV[1], 'funding.reversed', now_ms(),
  { paymentId = ARGV[2], amountUsdc = usdc(amount), pendingUsdc = usdc(int(rcall('HGET', account, 'pending'))) })
return { 1 }
