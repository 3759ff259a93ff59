--[[
  rename-key: a key's new name on the record auth reads, in a market held apart (where
  lua/set-key-limit.lua runs on the owner's slot and cannot reach it). Only an existing key is
  renamed, so a rename racing a revoke never brings the key's record back.

  KEYS[1]  API key hash             (apikey:<digest>)
  ARGV[1]  keyName: the new name

  Returns  1 renamed, 0 the key is gone
]]
local rcall = redis.call

if rcall('EXISTS', KEYS[1]) == 0 then return 0 end
rcall('HSET', KEYS[1], 'name', ARGV[1])
return 1
