-- lib/record: an attempt's record, as two fields of its hash, each its values joined by REC_SEP in
-- the order of src/records/attempt-fields.ts: a, written as it is admitted (whose it is, the offer
-- and ask, both holds), and e, written by the script that ends it (how and when it ended, what it
-- cost). A field of a small hash is a listpack entry that Redis finds by walking the ones before
-- it, so a clear that read eleven fields and wrote eight more now reads two and writes one. Each
-- value is one the gateway made but the model, which goes last: nothing it holds can shift
-- another. Attempts admitted before the packing keep a field per value (lib/attempts reads and
-- ends them in that shape).
local REC_SEP = '\31'

-- The admission's values, model last; '' for none (tried, group and period usually).
local function pack_admission(id, account_id, key_id, offer_id, ask, hold_usdc, hold_diem, admitted_at,
                              request_id, tried, group, period, model)
  local sep = REC_SEP
  return id .. sep .. account_id .. sep .. key_id .. sep .. offer_id .. sep .. ask .. sep .. hold_usdc .. sep ..
    hold_diem .. sep .. admitted_at .. sep .. request_id .. sep .. tried .. sep .. group .. sep .. period .. sep ..
    model
end
-- Its 13 values, in that order.
local ADMISSION = '^([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31' ..
  '([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31(.*)$'

-- The end's values, named as the fields of an attempt before the packing (what lib/attempts writes
-- for one of those), in their order: a missing one is ''.
local END_FIELDS = { 'state', 'endedAt', 'costUsdc', 'cost', 'burn', 'writtenOff', 'disputed', 'fee',
  'inputTokens', 'outputTokens', 'outcome', 'estimated', 'upstreamCost', 'lateClear', 'errorCode', 'final' }
local function pack_end(e)
  local sep = REC_SEP
  return e.state .. sep .. e.endedAt .. sep .. (e.costUsdc or '') .. sep .. (e.cost or '') .. sep ..
    (e.burn or '') .. sep .. (e.writtenOff or '') .. sep .. (e.disputed or '') .. sep .. (e.fee or '') .. sep ..
    (e.inputTokens or '') .. sep .. (e.outputTokens or '') .. sep .. (e.outcome or '') .. sep ..
    (e.estimated or '') .. sep .. (e.upstreamCost or '') .. sep .. (e.lateClear or '') .. sep ..
    (e.errorCode or '') .. sep .. (e.final or '')
end
-- Its first eight values: state, endedAt, costUsdc, cost, burn, writtenOff, disputed, fee.
local END_HEAD = '^([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)'
-- Its state alone.
local END_STATE = '^[^\31]*'
