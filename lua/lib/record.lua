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
-- Its 13 values, in that order; captured, the 10 an attempt's readers use (lib/attempts read_attempt):
-- not the id, the request id or the offers tried (a capture is a string made on every clear).
local ADMISSION = '^[^\31]*\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31' ..
  '([^\31]*)\31[^\31]*\31[^\31]*\31([^\31]*)\31([^\31]*)\31(.*)$'

-- The end's values, named as the fields of an attempt before the packing (what lib/attempts writes
-- for one of those), in their order: a missing one is ''.
local END_FIELDS = { 'state', 'endedAt', 'costUsdc', 'cost', 'burn', 'writtenOff', 'disputed', 'fee',
  'inputTokens', 'outputTokens', 'outcome', 'estimated', 'upstreamCost', 'lateClear', 'errorCode', 'final' }
-- The end from its values, in that order (nil for none): the clear's, on every paid request, with
-- no table made for them.
local function pack_end_values(state, ended_at, cost_usdc, cost, burn, written_off, disputed, fee, input_tokens,
                               output_tokens, outcome, estimated, upstream_cost, late_clear, error_code, final)
  local sep = REC_SEP
  return state .. sep .. ended_at .. sep .. (cost_usdc or '') .. sep .. (cost or '') .. sep .. (burn or '') .. sep ..
    (written_off or '') .. sep .. (disputed or '') .. sep .. (fee or '') .. sep .. (input_tokens or '') .. sep ..
    (output_tokens or '') .. sep .. (outcome or '') .. sep .. (estimated or '') .. sep .. (upstream_cost or '') ..
    sep .. (late_clear or '') .. sep .. (error_code or '') .. sep .. (final or '')
end
-- The same from a table of them by name.
local function pack_end(e)
  return pack_end_values(e.state, e.endedAt, e.costUsdc, e.cost, e.burn, e.writtenOff, e.disputed, e.fee,
    e.inputTokens, e.outputTokens, e.outcome, e.estimated, e.upstreamCost, e.lateClear, e.errorCode, e.final)
end
-- Its first eight values: state, endedAt, costUsdc, cost, burn, writtenOff, disputed, fee.
local END_HEAD = '^([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)'
-- Its state alone.
local END_STATE = '^[^\31]*'
