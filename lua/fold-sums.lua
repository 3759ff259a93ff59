--[[
  fold-sums: what a reader folded of a Stream's entries past the sums' cursor added to the sums
  (src/records/stream-sums.ts), only if no other reader moved the cursor meanwhile: two reads that
  fold the same entries never count one twice (the slower is told, reads the cursor again, and
  folds only what is past it). A reset drops every sum first: the Stream lost entries they hold;
  it starts a new generation, so that a fold read before it (of entries since lost, from the same
  cursor, none when the sums were new) is refused after it.

  KEYS[1]  sums hash                (acct:<id>:usage, or a fills Stream's <stream>:sums), in its Stream's slot:
           cursor (the last entry folded), start (the first), deleted (the Stream's
           max-deleted-entry-id as of the last reset), gen (resets so far), <hour>:<name> -> an integer sum
  ARGV[1]  expected: the cursor the reader read ('' when there was none)
  ARGV[2]  gen: the generation the reader read ('' when there was none)
  ARGV[3]  cursor: the id of the last entry folded ('' with a reset: nothing folded yet)
  ARGV[4]  reset: '1' to drop every sum first, with deleted then ARGV[5]; else '0'
  ARGV[5]  deleted: the Stream's max-deleted-entry-id, as the reader read it
  ARGV[6]  ttlMs: how long the sums outlive their last fold (by then every hour in them is stale)
  ARGV[7]  start: the id of the first entry folded, kept by the first fold (ARGV[1] '')
  ARGV[8..]  <hour>:<name>, amount pairs to add (integers)

  Returns 1 folded, 0 the cursor had moved: nothing written.
]]
local rcall = redis.call

local was = rcall('HMGET', KEYS[1], 'cursor', 'gen')
if (was[1] or '') ~= ARGV[1] or (was[2] or '') ~= ARGV[2] then return 0 end
if ARGV[4] == '1' then
  rcall('DEL', KEYS[1])
  rcall('HSET', KEYS[1], 'deleted', ARGV[5], 'gen', (tonumber(was[2]) or 0) + 1)
end
if ARGV[3] ~= '' then rcall('HSET', KEYS[1], 'cursor', ARGV[3]) end
if ARGV[1] == '' and ARGV[7] ~= '' then rcall('HSET', KEYS[1], 'start', ARGV[7]) end
for i = 8, #ARGV - 1, 2 do
  rcall('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
rcall('PEXPIRE', KEYS[1], ARGV[6])
return 1
