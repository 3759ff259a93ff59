import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import {
  billBurn,
  costAtAsk,
  formatMicros,
  type MicroDiem,
  mulDivCeil,
  parseMicros,
  sumDivCeil,
} from '../src/money/units.ts'

describe('money units', () => {
  test('parses decimal strings and JSON numbers into exact micro units', () => {
    expect(parseMicros('5.000000')).toBe(5_000_000)
    expect(parseMicros('0.7')).toBe(700_000)
    expect(parseMicros(0.7)).toBe(700_000)
    expect(parseMicros(2.8)).toBe(2_800_000)
    expect(parseMicros('1000')).toBe(1_000_000_000)
    expect(parseMicros('0.000001')).toBe(1)
    expect(parseMicros('-1.5')).toBe(-1_500_000)
  })

  test('refuses what it cannot represent exactly', () => {
    for (const bad of ['', 'abc', '1.0000001', '1e6', '1,5', '.5', '1.', ' ', 'NaN']) {
      expect(parseMicros(bad)).toBeNull()
    }
    expect(parseMicros(1e-7)).toBeNull()
    expect(parseMicros(Number.NaN)).toBeNull()
  })

  test('formats with exactly six fractional digits', () => {
    expect(formatMicros(0)).toBe('0.000000')
    expect(formatMicros(1)).toBe('0.000001')
    expect(formatMicros(12_345_678)).toBe('12.345678')
    expect(formatMicros(-1_500_000)).toBe('-1.500000')
    expect(() => formatMicros(1.5)).toThrow()
  })

  test('round trips every amount', () => {
    for (const micros of [0, 1, 999_999, 1_000_000, 123_456_789_012]) {
      expect(parseMicros(formatMicros(micros))).toBe(micros)
    }
  })

  test('ceil division is exact past 2^53 intermediates', () => {
    expect(mulDivCeil(3, 1, 2)).toBe(2)
    expect(mulDivCeil(4, 1, 2)).toBe(2)
    expect(mulDivCeil(9_007_199_254_740_991, 3, 3)).toBe(9_007_199_254_740_991)
  })

  test('ceil division agrees with exact integer arithmetic on both sides of 2^53', () => {
    const exact = (a: number, b: number, d: number) =>
      Number((BigInt(a) * BigInt(b) + BigInt(d) - 1n) / BigInt(d))
    const near = (n: number) => fc.integer({ min: Math.max(1, n - 5000), max: n })
    const safe = Number.MAX_SAFE_INTEGER
    fc.assert(
      fc.property(
        fc.oneof(fc.integer({ min: 0, max: 2 ** 31 }), near(2 ** 32), near(safe)),
        fc.oneof(fc.integer({ min: 0, max: 10_000 }), near(2 ** 21), near(2 ** 26)),
        fc.oneof(fc.constantFrom(1, 3, 7, 100, 1_000_000), fc.integer({ min: 1, max: 2 ** 30 })),
        (a, b, d) => {
          const expected = exact(a, b, d)
          if (!Number.isSafeInteger(expected)) return
          expect(mulDivCeil(a, b, d)).toBe(expected)
        },
      ),
      { numRuns: 20_000 },
    )
  })

  test('a sum of products is divided once, exact on both sides of 2^53', () => {
    // 0.7 + 0.7 + 0.7 = 2.1 -> 3, where each rounded up alone would be 3 x 1
    expect(
      billBurn([
        [1, 700_000],
        [1, 700_000],
        [1, 700_000],
      ]),
    ).toBe(3 as MicroDiem)
    expect(
      billBurn([
        [1, 500_000],
        [1, 500_000],
      ]),
    ).toBe(1 as MicroDiem)
    expect(billBurn([])).toBe(0 as MicroDiem)
    const term = fc.tuple(
      fc.oneof(
        fc.integer({ min: 0, max: 2 ** 31 }),
        fc.integer({ min: 2 ** 40, max: Number.MAX_SAFE_INTEGER }),
      ),
      fc.oneof(fc.integer({ min: 0, max: 30_000_000 }), fc.integer({ min: 0, max: 2 ** 26 })),
    )
    fc.assert(
      fc.property(
        fc.array(term, { maxLength: 4 }),
        fc.oneof(fc.constantFrom(1, 7, 1_000_000), fc.integer({ min: 1, max: 2 ** 30 })),
        (terms, d) => {
          const sum = terms.reduce((total, [a, b]) => total + BigInt(a) * BigInt(b), 0n)
          const expected = Number((sum + BigInt(d) - 1n) / BigInt(d))
          if (!Number.isSafeInteger(expected)) return
          expect(sumDivCeil(terms, d)).toBe(expected)
        },
      ),
      { numRuns: 20_000 },
    )
  })

  test('burn and cost round up, never down', () => {
    // 1 token at 0.70 DIEM per million = 0.7 micro-DIEM -> 1
    expect(billBurn([[1, 700_000]])).toBe(1 as MicroDiem)
    expect(billBurn([[1_000_000, 700_000]])).toBe(700_000 as MicroDiem)
    expect(costAtAsk(1 as MicroDiem, 30)).toBe(1 as never)
    expect(costAtAsk(1_000_000 as MicroDiem, 45)).toBe(450_000 as never)
    expect(costAtAsk(101 as MicroDiem, 50)).toBe(51 as never)
  })
})
