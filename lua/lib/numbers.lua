-- lib/numbers: integer arithmetic on Lua's doubles, exact below 2^53, and integer formatting
-- (a plain tostring turns 1e14 into "1e+14", which HINCRBY refuses).
local rcall = redis.call

local function int(value)
  local n = tonumber(value)
  if n == nil then return 0 end
  return n
end

local function s(n)
  return string.format('%d', n)
end

-- floor(n / d) for non-negative integers, corrected for the double division's rounding.
local function idiv(n, d)
  local q = math.floor(n / d)
  if q * d > n then q = q - 1 elseif (q + 1) * d <= n then q = q + 1 end
  return q
end

local function ceil_div(n, d)
  return idiv(n + d - 1, d)
end

local function now_ms()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
