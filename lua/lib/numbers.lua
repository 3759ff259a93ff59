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

-- The UTC day of a time in ms, as YYYY-MM-DD (the civil calendar from a day count; Redis's Lua has
-- no os.date). Usage stats are bucketed by it.
local function utc_day(ms)
  local z = math.floor(ms / 86400000) + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400 + (m <= 2 and 1 or 0)
  return string.format('%04d-%02d-%02d', y, m, d)
end
