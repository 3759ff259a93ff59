-- lib/numbers: integer arithmetic on Lua's doubles, exact below 2^53, and integer formatting
-- (a plain tostring turns 1e14 into "1e+14", which HINCRBY refuses).
-- Library functions held in locals: a global is two table lookups on every use. Bound per call
-- by bind_globals (the scripts' prologue): a Redis function library's own load sees no globals.
local rcall, format, floor, number
local function bind_globals()
  rcall, format, floor, number = redis.call, string.format, math.floor, tonumber
end

-- Small numbers (counts, cents, caps, '0') come back call after call: parsed once and kept, in a
-- function library from call to call (tonumber runs strtod twice). Bounded: at most 4096 strings.
local parsed, parsed_count = {}, 0
local function int(value)
  local n = parsed[value]
  if n then return n end
  n = number(value)
  if n == nil then return 0 end
  if n >= 0 and n < 1024 and parsed_count < 4096 then parsed[value], parsed_count = n, parsed_count + 1 end
  return n
end

-- A number as the scripts store it on a hash (an amount, a count, a time; missing or '' is 0), or
-- as Redis answers it: parsed by arithmetic, which runs strtod once where tonumber, a C call, runs
-- it twice. A stored value that is not a number stops the script: an amount is never read as 0
-- by mistake. Kept like int's.
local function stored(value)
  local n = parsed[value]
  if n then return n end
  if not value or value == '' then return 0 end
  n = value + 0
  if n >= 0 and n < 1024 and parsed_count < 4096 then parsed[value], parsed_count = n, parsed_count + 1 end
  return n
end

-- A lease's length, ms, as the gateway sends it: the same on every call, so the last one is kept
-- parsed (as int parses it).
local lease_arg, lease_n = nil, 0
local function lease_ms(value)
  if value ~= lease_arg then lease_arg, lease_n = value, int(value) end
  return lease_n
end

-- Also for the numbers passed to redis.call that Redis parses (scores, TTLs, LIMIT): a number
-- argument costs Redis a '%.17g' snprintf there, dearer than this format (see BENCHMARKS.md, "The
-- money scripts as a function library"). Small ones are formatted once and kept, as int keeps them
-- parsed.
local small = {}
local function s(n)
  local v = small[n]
  if v then return v end
  v = format('%d', n)
  if n >= 0 and n < 1024 then small[n] = v end
  return v
end

-- A time in ms formatted, the last one kept: a script formats its time now more than once.
local stamp_n, stamp_v
local function stamp(ms)
  if ms ~= stamp_n then stamp_n, stamp_v = ms, format('%d', ms) end
  return stamp_v
end

-- floor(n / d) for non-negative integers, corrected for the double division's rounding. x - x % 1
-- is floor(x) for any double, without math.floor's C call.
local function idiv(n, d)
  local q = n / d
  q = q - q % 1
  if q * d > n then q = q - 1 elseif (q + 1) * d <= n then q = q + 1 end
  return q
end

local function ceil_div(n, d)
  return idiv(n + d - 1, d)
end

-- A running total that a supplier's reports can drive without bound (disputed burn): exact below
-- 2^53, then held there, so it never loses digits nor overflows HINCRBY in the middle of a clear.
local MAX_EXACT = 9007199254740991
local function capped_sum(a, b)
  local t = a + b
  if t > MAX_EXACT then return MAX_EXACT end
  return t
end

-- TIME's two fields are always digits: arithmetic reads them in one parse each (tonumber takes two),
-- the seconds only when they moved since the last call.
local time_s, time_ms = nil, 0
local function now_ms()
  local t = rcall('TIME')
  if t[1] ~= time_s then time_s, time_ms = t[1], t[1] * 1000 end
  local ms = t[2] / 1000
  return time_ms + ms - ms % 1
end

-- The UTC civil date of a time in ms: year, month, day (from a day count; Redis's Lua has no
-- os.date).
local DAY_MS = 86400000
local function civil(ms)
  local z = floor(ms / DAY_MS) + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local d = doy - floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  return yoe + era * 400 + (m <= 2 and 1 or 0), m, d
end

-- The UTC day of a time in ms as a count of days (0: 1970-01-01). A supplier key's allocation
-- resets at 00:00 UTC: the balance the upstream reports holds on the day it was learned (lib/offers).
local function day_of(ms)
  return floor(ms / DAY_MS)
end

-- The UTC day of a time in ms, as YYYY-MM-DD. Usage stats are bucketed by it.
local function utc_day(ms)
  local y, m, d = civil(ms)
  return format('%04d-%02d-%02d', y, m, d)
end

-- A key budget's period (limitReset) around a time in ms: when it started, 00:00 UTC of the day,
-- of the week's Monday, or of the month's 1st (src/accounts/budget-periods.ts says the same).
local function period_start(kind, ms)
  local day = floor(ms / DAY_MS)
  -- day 0, 1970-01-01, was a Thursday: three days after a Monday
  if kind == 'weekly' then
    day = day - (day + 3) % 7
  elseif kind == 'monthly' then
    local _, _, d = civil(ms)
    day = day - (d - 1)
  end
  return day * DAY_MS
end

-- When the period that started at `start` ends: the next one's start.
local function period_end(kind, start)
  if kind == 'daily' then return start + DAY_MS end
  if kind == 'weekly' then return start + 7 * DAY_MS end
  local y, m = civil(start)
  local days = 31
  if m == 2 then
    days = (y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0)) and 29 or 28
  elseif m == 4 or m == 6 or m == 9 or m == 11 then
    days = 30
  end
  return start + days * DAY_MS
end

-- Whether a charge counts in a periodic key's current period, pstart (as the account hash keeps
-- it; nil for none): the period its request was admitted in, `period` (the attempt's; nil when the
-- key had a lifetime limit then), or, where the owner changed the key's reset since, the current
-- period if the request was admitted within it (`admitted_at`, ms): a lifetime limit made daily,
-- a daily one made weekly. Never a period that started after the admission: a clear past the
-- boundary counts in the period that ended.
local function in_period(pstart, period, admitted_at)
  if not pstart then return false end
  return pstart == period or stored(admitted_at) >= stored(pstart)
end
