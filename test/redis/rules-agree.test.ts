// Rules written in both Lua and TypeScript agree: the cost at an ask (the hold and the charge in
// lua/, the quote and the capacity figures in src/), the default record retention, the UTC day.
import { afterAll, expect, test } from 'bun:test'
import fc from 'fast-check'
import libAttempts from '../../lua/lib/attempts.lua' with { type: 'text' }
import libKeys from '../../lua/lib/keys.lua' with { type: 'text' }
import libNumbers from '../../lua/lib/numbers.lua' with { type: 'text' }
import { costAtAsk, type MicroDiem } from '../../src/money/units.ts'
import { utcDay } from '../../src/records/days.ts'
import { DEFAULT_RECORD_RETENTION_MS } from '../../src/records/refusals.ts'
import { createRedis } from '../../src/redis/connection.ts'
import { testRedisUrl } from '../helpers/stack.ts'

const redis = createRedis(testRedisUrl(), { name: 'svc-test-rules' })
afterAll(() => redis.disconnect())

const lua = (body: string, ...args: (string | number)[]) =>
  redis.eval(`${libNumbers}\nbind_globals()\n${body}`, 0, ...args.map(String))

test('ceil(burn x ask / 100): the scripts and costAtAsk agree to the micro-USDC', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.tuple(fc.integer({ min: 0, max: 2 ** 46 }), fc.integer({ min: 1, max: 100 })), {
        minLength: 1,
        maxLength: 50,
      }),
      async (pairs) => {
        const flat = pairs.flat()
        const costs = (await lua(
          'local out = {} for i = 1, #ARGV, 2 do out[#out + 1] = s(ceil_div(int(ARGV[i]) * int(ARGV[i + 1]), 100)) end return out',
          ...flat,
        )) as string[]
        expect(costs.map(Number)).toEqual(pairs.map(([burn, ask]) => costAtAsk(burn as MicroDiem, ask)))
      },
    ),
    { numRuns: 40 },
  )
})

test('the default record retention is the same in the scripts and in TypeScript', async () => {
  const ttl = await redis.eval(
    `${libKeys}\n${libNumbers}\n${libAttempts}\nbind_globals()\nkeep_records_for('')\nreturn record_ttl_ms`,
    0,
  )
  expect(Number(ttl)).toBe(DEFAULT_RECORD_RETENTION_MS)
})

test('utc_day names the same day as utcDay', async () => {
  const times = [0, 951_868_799_999, 1_709_208_000_000, 1_798_761_599_999, 4_107_542_400_000]
  const days = await lua(
    'local out = {} for i, ms in ipairs(ARGV) do out[i] = utc_day(tonumber(ms)) end return out',
    ...times,
  )
  expect(days).toEqual(times.map(utcDay))
})
