--[[
  fold-sums: what a reader folded of a Stream's entries past the sums' cursor added to the sums
  (src/records/stream-sums.ts), only if no other reader moved the cursor meanwhile: two reads that
  fold the same entries never count one twice (the slower is told, reads the cursor again, and
  folds only what is past it). A reset drops every sum first: the Stream lost entries they hold.

  KEYS[1]  sums hash                (acct:<id>:usage, or a fills Stream's <stream>:sums), in its Stream's slot:
           cursor (the last entry folded), start (the first), deleted (the Stream's
           max-deleted-entry-id as of the last reset), <hour>:<name> -> an integer sum
  ARGV[1]  expected: the cursor the reader read ('' when there was none)
  ARGV[2]  cursor: the id of the last entry folded ('' with a reset: nothing folded yet)
  ARGV[3]  reset: '1' to drop every sum first, with deleted then ARGV[4]; else '0'
  ARGV[4]  deleted: the Stream's max-deleted-entry-id, as the reader read it
  ARGV[5]  ttlMs: how long the sums outlive their last fold (by then every hour in them is stale)
  ARGV[6]  start: the id of the first entry folded, kept by the first fold (ARGV[1] '')
  ARGV[7..]  <hour>:<name>, amount pairs to add (integers)

  Returns 1 folded, 0 the cursor had moved: nothing written.
]]
local rcall = redis.call

if (rcall('HGET', KEYS[1], 'cursor') or '') ~= ARGV[1] then return 0 end
if ARGV[3] == '1' then
  rcall('DEL', KEYS[1])
  rcall('HSET', KEYS[1], 'deleted', ARGV[4])
end
if ARGV[2] ~= '' then rcall('HSET', KEYS[1], 'cursor', ARGV[2]) end
if ARGV[1] == '' and ARGV[6] ~= '' then rcall('HSET', KEYS[1], 'start', ARGV[6]) end
for i = 7, #ARGV - 1, 2 do
  rcall('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
rcall('PEXPIRE', KEYS[1], ARGV[5])
return 1
