--[[
  move-pending: the account's side of moving a payment to another transaction in a market held
  apart, after lua/move-payment.lua moved its record on the indexes' slot: the account's payments
  hash lists the new payment where it listed the old, still pending, and keeps the old as `moved`,
  so a late credit of the old payment (lua/credit-pending.lua) finds it there and credits nothing.
  An old payment the account never listed (its credit's account step had not run) is kept as
  `moved` alone: the new payment's confirmation credits it then, once.

  KEYS[1]  the account's payments hash (acct:<accountId>:payments, payment id -> pending|confirmed|moved|taken back)
  ARGV[1]  paymentId: the old payment id
  ARGV[2]  movedTo: the new payment id

  Returns  { 1 }   moved
           { 0 }   moved before
           { -1 }  the old payment is confirmed or taken back on the account: nothing moves
]]
local rcall = redis.call

local state = rcall('HGET', KEYS[1], ARGV[1])
if state == 'moved' then return { 0 } end
if state and state ~= 'pending' then return { -1 } end
rcall('HSET', KEYS[1], ARGV[1], 'moved')
if state == 'pending' then rcall('HSETNX', KEYS[1], ARGV[2], 'pending') end
return { 1 }
