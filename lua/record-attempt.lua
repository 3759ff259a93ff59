--[[
  record-attempt: copy one ended attempt from the attempts:ended stream into its request record
  (what GET /v1/agent/requests/{support_reference} reads) and, when the attempt served the
  request, into the day's usage stats. The write-behind worker runs it for each entry it reads.
  Copying an entry again (a worker died between copy and ack and another claimed the entry)
  changes nothing: the stats count each served attempt once.
  Includes lib/keys, lib/numbers.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  support reference
  ARGV[2]  attempt number (1..5)
  ARGV[3]  the attempt's end: cleared | released | reaped | refused
  ARGV[4]  the attempt as lookup shows it, JSON
  ARGV[5]  account id (the record's owner)
  ARGV[6]  request id
  ARGV[7]  model id
  ARGV[8]  UTC day the attempt ended (YYYY-MM-DD): its stats bucket
  ARGV[9]  record lifetime, seconds
  ARGV[10] stats bucket lifetime, seconds

  Returns 1 copied, 0 already copied (nothing changed).
]]

local record = k_request(ARGV[1])
local n = ARGV[2]
local ended = ARGV[3]
-- An attempt ends once, except that a reaped one may still be cleared late. A copy that arrives
-- after a later state (another worker's batch, out of order) never overwrites it.
local was = rcall('HGET', record, 's' .. n)
if was and (was ~= 'reaped' or ended ~= 'cleared') then return 0 end

rcall('HSET', record, 'a' .. n, ARGV[4], 's' .. n, ended,
  'accountId', ARGV[5], 'requestId', ARGV[6], 'model', ARGV[7])
rcall('EXPIRE', record, int(ARGV[9]))
if ended == 'cleared' then
  local day = k_stats_day(ARGV[8])
  rcall('HINCRBY', day, ARGV[7], 1)
  rcall('EXPIRE', day, int(ARGV[10]))
end
return 1
