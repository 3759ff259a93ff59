// lib/numbers' stored: the parse of the amounts and counts the money scripts read back from their
// own hashes. It answers as int for every number and for a value missing or empty, and stops the
// script on one that is not a number, where int reads 0: a stored amount is never taken as 0.
import { describe, expect, test } from 'bun:test'
import libNumbers from '../../lua/lib/numbers.lua' with { type: 'text' }
import { freshMarketPerTest, type MarketFixture } from '../helpers/market.ts'

let fx: MarketFixture

describe('lua stored numbers', () => {
  freshMarketPerTest((each) => {
    fx = each
  })

  test('stored answers as int for numbers, missing and empty values, cached or not', async () => {
    const values = ['0', '7', '0007', '7.5', '1023', '1024', '-3', '', '123456789012345', '0x10', ' 12 ']
    // Each value twice in one call (the second from the cache where kept), then a missing field.
    const script = `${libNumbers}\nbind_globals()
  local out = {}
  for _, v in ipairs(ARGV) do
    for _ = 1, 2 do out[#out + 1] = string.format('%.17g %.17g', stored(v), int(v)) end
  end
  out[#out + 1] = string.format('%.17g %.17g', stored(false), stored(nil))
  return out`
    const got = (await fx.store.eval(script, 0, ...values)) as string[]
    const want = values.flatMap((v) => {
      const n = v.trim() === '' ? 0 : Number(v)
      return [`${n} ${n}`, `${n} ${n}`]
    })
    expect(got).toEqual([...want, '0 0'])
  })

  test('a stored value that is not a number stops the script', async () => {
    for (const value of ['abc', '12abc', ' ']) {
      const script = `${libNumbers}\nbind_globals()\nreturn stored(ARGV[1])`
      await expect(fx.store.eval(script, 0, value)).rejects.toThrow(/arithmetic/)
    }
  })
})
