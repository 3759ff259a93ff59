// A periodic budget's current period as GET /v1/agent/keys reads it from the account hash: the
// spent of the period last counted while it lasts, nothing once it ended, and never a period
// rolled back by a clock behind it.
import { expect, test } from 'bun:test'
import { currentPeriod, periodEnd, periodStart } from '../../src/accounts/budget-periods.ts'

const at = (iso: string) => Date.parse(iso)
const iso = (ms: number) => new Date(ms).toISOString()

test('periods start at 00:00 UTC of the day, the ISO week (Monday) and the month, and end at the next', () => {
  const sunday = at('2026-03-15T23:59:59.999Z')
  expect(iso(periodStart('daily', sunday))).toBe('2026-03-15T00:00:00.000Z')
  expect(iso(periodStart('weekly', sunday))).toBe('2026-03-09T00:00:00.000Z')
  expect(iso(periodStart('weekly', at('2026-03-16T00:00:00.000Z')))).toBe('2026-03-16T00:00:00.000Z')
  expect(iso(periodStart('monthly', sunday))).toBe('2026-03-01T00:00:00.000Z')
  expect(iso(periodEnd('monthly', at('2028-02-01T00:00:00.000Z')))).toBe('2028-03-01T00:00:00.000Z')
  expect(iso(periodEnd('monthly', at('2026-12-01T00:00:00.000Z')))).toBe('2027-01-01T00:00:00.000Z')
  expect(iso(periodEnd('weekly', at('2026-03-09T00:00:00.000Z')))).toBe('2026-03-16T00:00:00.000Z')
})

test('the spent of the period last counted, while it lasts; nothing once it ended; a clock behind still reads it', () => {
  const day = String(at('2026-03-11T00:00:00.000Z'))
  const next = at('2026-03-12T00:00:00.000Z')
  expect(currentPeriod('daily', day, '700', at('2026-03-11T23:00:00.000Z'))).toEqual({
    periodSpent: 700,
    resetsAt: next,
  })
  expect(currentPeriod('daily', day, '700', next)).toEqual({ periodSpent: 0, resetsAt: next + 86_400_000 })
  expect(currentPeriod('daily', day, '700', at('2026-03-10T23:59:00.000Z'))).toEqual({
    periodSpent: 700,
    resetsAt: next,
  })
  expect(currentPeriod('weekly', null, null, at('2026-03-11T12:00:00.000Z'))).toEqual({
    periodSpent: 0,
    resetsAt: at('2026-03-16T00:00:00.000Z'),
  })
})
