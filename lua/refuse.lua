--[[
  refuse: record a request refused at admission (402, 403, 429, 503) as an ended attempt of its
  own (state `refused`), so it resolves by its support reference like any other and goes on the
  ended-attempt Streams. No money moves. Writing it again (a retried record) overwrites the
  record and appends again.
  Includes lib/keys, lib/numbers, lib/ladder, lib/record, lib/attempts.

  KEYS[1]  keyspace base ("<prefix>:")
  ARGV[1]  attemptId: attempt id (`<support reference>.<n>`)
  ARGV[2]  accountId: account id
  ARGV[3]  apiKeyId: API key id
  ARGV[4]  requestId: request id
  ARGV[5]  model: model id
  ARGV[6]  errorCode: the contract's error code the buyer got
  ARGV[7]  recordRetentionMs: how long the record is kept, ms (the default is SVC_RECORD_RETENTION_DAYS's, set by the caller)

  Returns 1.
]]
keep_records_for(ARGV[7])
local now = now_ms()
local a = { id = ARGV[1], accountId = ARGV[2], keyId = ARGV[3], model = ARGV[5] }
-- Never admitted: its admission record (whose, which request) is written with its end.
a.admission = pack_admission(a.id, a.accountId, a.keyId, '', '', '', '', '', ARGV[4], '', '', '', a.model)
end_attempt(a, pack_end({ state = 'refused', errorCode = ARGV[6], endedAt = s(now) }), now, 'refused', '0', '', '', ARGV[6])
return 1
