// Rules written in both Lua and TypeScript agree: the cost at an ask (the hold and the charge in
// lua/, the quote and the capacity figures in src/), the record retention's one default, the UTC
// day, a key budget's period, and each script's KEYS and ARGV as its header numbers them.
import { afterAll, expect, test } from 'bun:test'
import fc from 'fast-check'
import libAttempts from '../../lua/lib/attempts.lua' with { type: 'text' }
import libKeys from '../../lua/lib/keys.lua' with { type: 'text' }
import libNumbers from '../../lua/lib/numbers.lua' with { type: 'text' }
import { LIMIT_RESETS, periodEnd, periodStart } from '../../src/accounts/budget-periods.ts'
import { costAtAsk, type MicroDiem } from '../../src/money/units.ts'
import { dayOf, utcDay } from '../../src/records/days.ts'
import { DEFAULT_RECORD_RETENTION_MS } from '../../src/records/refusals.ts'
import { SCRIPTS } from '../../src/redis/script-registry.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { createStore } from '../../src/redis/store.ts'
import { testRedisUrl } from '../helpers/stack.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-rules' })
afterAll(() => store.close())

const lua = (body: string, ...args: (string | number)[]) =>
  store.eval(`${libNumbers}\nbind_globals()\n${body}`, 0, ...args.map(String))

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

test('the record retention has one default, in TypeScript: the scripts refuse to guess one', async () => {
  const keep = (ms: string) =>
    store.eval(
      `${libKeys}\n${libNumbers}\n${libAttempts}\nbind_globals()\nkeep_records_for(ARGV[1])\nreturn record_ttl_ms`,
      0,
      ms,
    )
  await expect(keep('')).rejects.toThrow('record retention')
  expect(Number(await keep(String(DEFAULT_RECORD_RETENTION_MS)))).toBe(DEFAULT_RECORD_RETENTION_MS)
})

test('every script takes the KEYS its header block numbers and the ARGV it names, as the registry declares', () => {
  const off: string[] = []
  for (const [name, script] of Object.entries(SCRIPTS)) {
    const header = script.body.slice(0, script.body.indexOf(']]'))
    const keys = [...header.matchAll(/^ {2}KEYS\[(\d+)\]/gm)].map((m) => Number(m[1]))
    if (keys.length !== script.keys || keys.some((n, i) => n !== i + 1))
      off.push(`${name}: KEYS ${keys} vs ${script.keys}`)
    // `ARGV[n]  name: what it is`, numbered from 1 with no gap, the names in the registry's order.
    const argv = [...header.matchAll(/^ {2}ARGV\[(\d+)\]\s+(\w+):/gm)]
    if (argv.some((m, i) => Number(m[1]) !== i + 1))
      off.push(`${name}: ARGV numbered ${argv.map((m) => m[1])}`)
    // Every numbered line is a named one: a line in another form would otherwise go unchecked.
    const numbered = [...header.matchAll(/^ {2}ARGV\[(\d+)\]/gm)].length
    if (numbered !== argv.length) off.push(`${name}: ${numbered - argv.length} ARGV lines without a name`)
    const named = argv.map((m) => m[2])
    if (named.join() !== script.argv.join()) off.push(`${name}: ARGV ${named} vs ${script.argv}`)
    // Only a variadic script's header goes on past its named ARGV (ARGV[n..]).
    if (/^ {2}ARGV\[\d+\.\.\]/m.test(header) !== script.variadic) off.push(`${name}: variadic`)
  }
  expect(off).toEqual([])
})

test("a call missing an argument, or with values past a fixed script's, is refused before it reaches Redis", () => {
  expect(() => runScript(store, 'renew', ['base'], { attemptId: 'attempt' } as never)).toThrow(
    'renew: leaseMs is missing',
  )
  expect(() => runScript(store, 'renew', ['base'], { attemptId: 'a', leaseMs: 1 }, ['more'])).toThrow(
    'renew takes no values beyond its arguments',
  )
  expect(() => runScript(store, 'renew', ['base', 'other'], { attemptId: 'a', leaseMs: 1 })).toThrow(
    'renew takes 1 keys',
  )
})

test('utc_day names the same day as utcDay', async () => {
  const times = [0, 951_868_799_999, 1_709_208_000_000, 1_798_761_599_999, 4_107_542_400_000]
  const days = await lua(
    'local out = {} for i, ms in ipairs(ARGV) do out[i] = utc_day(tonumber(ms)) end return out',
    ...times,
  )
  expect(days).toEqual(times.map(utcDay))
  // The day a supplier key's balance holds on (lib/offers, ladder-view.ts): the same day, counted.
  const counts = await lua(
    'local out = {} for i, ms in ipairs(ARGV) do out[i] = day_of(tonumber(ms)) end return out',
    ...times,
  )
  expect(counts).toEqual(times.map(dayOf))
  expect(times.map((ms) => utcDay(dayOf(ms) * 86_400_000))).toEqual(times.map(utcDay))
})

test('period_start and period_end bound the same daily, weekly and monthly periods as periodStart and periodEnd', async () => {
  // Edges of days, ISO weeks and months (leap and century years among them), then any times.
  const edges = [0, 951_782_400_000, 951_868_799_999, 1_709_164_800_000, 1_773_619_200_000, 1_773_619_199_999]
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.integer({ min: 0, max: 4_102_444_800_000 }), { minLength: 1, maxLength: 40 }),
      async (random) => {
        const times = [...edges, ...random]
        for (const kind of LIMIT_RESETS) {
          const bounds = (await lua(
            'local out = {} for i = 2, #ARGV do local s0 = period_start(ARGV[1], tonumber(ARGV[i])) out[#out + 1] = { s(s0), s(period_end(ARGV[1], s0)) } end return out',
            kind,
            ...times,
          )) as string[][]
          const expected = times.map((ms) => {
            const start = periodStart(kind, ms)
            return [String(start), String(periodEnd(kind, start))]
          })
          expect(bounds).toEqual(expected)
        }
      },
    ),
    { numRuns: 20 },
  )
})
