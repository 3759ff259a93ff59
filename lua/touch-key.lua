--[[
  touch-key: record when a key was last used. Only an existing key is touched, so a write racing
  a revoke never brings the key's hash back.

  KEYS[1]  API key hash             (apikey:<digest>)

  Returns  1 touched, 0 the key is gone
  Times come from Redis TIME, in milliseconds.
]]
local rcall = redis.call

if rcall('EXISTS', KEYS[1]) == 0 then return 0 end
local time = rcall('TIME')
local now = time[1] .. string.format('%03d', math.floor(tonumber(time[2]) / 1000))
rcall('HSET', KEYS[1], 'lastUsedAt', now)
return 1
