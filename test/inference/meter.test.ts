// The meter against bills computed by hand from the upstream's rules: cache reads and writes at
// their prices, the long-prompt tier for the whole request past its threshold, fallbacks to input.
import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import type { TextPrices, TokenRates } from '../../src/catalog/entry.ts'
import { mapUpstreamModel } from '../../src/catalog/venice-mapping.ts'
import {
  boundedPrompt,
  burnOf,
  costDisagrees,
  readCost,
  readPromptUsage,
  readUsage,
  type Usage,
  worstBurn,
} from '../../src/inference/meter.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { listPriceBurn } from '../../src/sim/billing.ts'
import { findSimModel, type ListPrice, type VeniceModel } from '../../src/sim/models.ts'

/** glm-4.6 as the simulated supplier publishes it (micro-DIEM per million tokens). */
const glm: TextPrices = {
  inputPerMillion: 850_000,
  outputPerMillion: 2_750_000,
  cacheInputPerMillion: 110_000,
  cacheWritePerMillion: 1_050_000,
  extended: {
    contextTokenThreshold: 2_000,
    inputPerMillion: 1_700_000,
    outputPerMillion: 4_125_000,
    cacheInputPerMillion: 220_000,
    cacheWritePerMillion: 2_100_000,
  },
}
const llama: TextPrices = { inputPerMillion: 700_000, outputPerMillion: 2_800_000 }

const usage = (
  promptTokens: number,
  completionTokens: number,
  cachedTokens = 0,
  cacheWriteTokens = 0,
): Usage => ({
  promptTokens,
  completionTokens,
  cachedTokens,
  cacheWriteTokens,
})

describe('burnOf bills as the upstream does', () => {
  test('the catalog maps the simulated glm-4.6 to exactly these prices', () => {
    expect(mapUpstreamModel(findSimModel('glm-4.6')!)!.prices).toEqual(glm)
  })

  test('uncached at input, cache reads at cache_input, writes at cache_write, completion at output', () => {
    // 300 x 0.85 = 255; 600 x 0.11 = 66; 100 x 1.05 = 105; 50 x 2.75 = 137.5 -> 138
    expect(+burnOf(usage(1_000, 50, 600, 100), glm)).toBe(564)
    // no cache: 1,000 x 0.85 = 850; 50 x 2.75 -> 138
    expect(+burnOf(usage(1_000, 50), glm)).toBe(988)
    // all written: 1,000 x 1.05 = 1,050, above the uncached price
    expect(+burnOf(usage(1_000, 0, 0, 1_000), glm)).toBe(1_050)
  })

  test('past the threshold every term is at the extended price; at the threshold none is', () => {
    // 1,000 x 1.7 = 1,700; 1,000 x 0.22 = 220; 1 x 2.1 = 2.1; 10 x 4.125 = 41.25: 1,963.35 -> 1,964
    expect(+burnOf(usage(2_001, 10, 1_000, 1), glm)).toBe(1_964)
    // 2,000 x 0.85 = 1,700; 10 x 2.75 = 27.5 -> 28
    expect(+burnOf(usage(2_000, 10), glm)).toBe(1_728)
    // 2,001 x 1.7 = 3,401.7; 10 x 4.125 = 41.25: 3,442.95 -> 3,443
    expect(+burnOf(usage(2_001, 10), glm)).toBe(3_443)
  })

  test('an unpublished cache price is input (extended input in the extended tier), one sum with it', () => {
    // llama has no cache prices: 1,000 x 0.7 = 700 whatever the split; 1 x 2.8 = 2.8: 702.8 -> 703
    expect(+burnOf(usage(1_000, 1, 500, 250), llama)).toBe(703)
    expect(+burnOf(usage(1_000, 1), llama)).toBe(703)
    const plainExtended: TextPrices = {
      ...llama,
      cacheInputPerMillion: 70_000,
      extended: { contextTokenThreshold: 100, inputPerMillion: 1_400_000, outputPerMillion: 5_600_000 },
    }
    // 101 tokens, 50 of them cached, all at the extended input 1.4: 141.4 -> 142
    expect(+burnOf(usage(101, 0, 50), plainExtended)).toBe(142)
    // below the threshold the cache read has its own price: 50 x 0.7 = 35; 50 x 0.07 = 3.5: 38.5 -> 39
    expect(+burnOf(usage(100, 0, 50), plainExtended)).toBe(39)
  })

  test('a model without cache prices bills prompt x input + completion x output, rounded up once', () => {
    for (const [p, c] of [
      [0, 0],
      [1, 1],
      [12_345, 678],
    ] as const) {
      expect(+burnOf(usage(p, c, Math.floor(p / 2)), llama)).toBe(
        Math.ceil((p * 700_000 + c * 2_800_000) / 1e6),
      )
    }
  })
})

/** The bill of billing.md as an exact rational, its numerator over a million rounded up with BigInt. */
function exactBill(p: TextPrices, prompt: number, cached: number, written: number, completion: number) {
  const tier: TokenRates = p.extended && prompt > p.extended.contextTokenThreshold ? p.extended : p
  const input = BigInt(tier.inputPerMillion)
  const numerator =
    BigInt(prompt - cached - written) * input +
    BigInt(cached) * BigInt(tier.cacheInputPerMillion ?? input) +
    BigInt(written) * BigInt(tier.cacheWritePerMillion ?? input) +
    BigInt(completion) * BigInt(tier.outputPerMillion)
  return Number((numerator + 999_999n) / 1_000_000n)
}

/** The same prices as the simulated supplier would publish them in its `/models`. */
function simModelOf(p: TextPrices): VeniceModel {
  const list = (micros: number): ListPrice => ({ usd: micros / 1e6, diem: micros / 1e6 })
  const tier = (rates: TokenRates) => ({
    input: list(rates.inputPerMillion),
    output: list(rates.outputPerMillion),
    ...(rates.cacheInputPerMillion === undefined ? {} : { cache_input: list(rates.cacheInputPerMillion) }),
    ...(rates.cacheWritePerMillion === undefined ? {} : { cache_write: list(rates.cacheWritePerMillion) }),
  })
  const extended = p.extended && {
    context_token_threshold: p.extended.contextTokenThreshold,
    ...tier(p.extended),
  }
  return {
    id: 'prop-model',
    object: 'model',
    created: 0,
    owned_by: 'test',
    type: 'text',
    model_spec: { name: 'prop', pricing: { ...tier(p), ...(extended ? { extended } : {}) } },
  }
}

describe('the bill is one sum, rounded up once', () => {
  test('terms with fractions are not each rounded up', () => {
    // 3 x 0.7 = 2.1; 3 x 2.8 = 8.4: 10.5 -> 11, not 3 + 9
    expect(+burnOf(usage(3, 3), llama)).toBe(11)
    // 1 x 0.85 + 1 x 0.11 + 1 x 1.05 + 1 x 2.75 = 4.76 -> 5, not 1 + 1 + 2 + 3
    expect(+burnOf(usage(3, 1, 1, 1), glm)).toBe(5)
    // a bill that is a whole number of micro-DIEM is not rounded at all: 0.5 + 0.5 = 1
    expect(+burnOf(usage(1, 0, 0, 0), { inputPerMillion: 500_000, outputPerMillion: 500_000 })).toBe(1)
    expect(+burnOf(usage(1, 1), { inputPerMillion: 500_000, outputPerMillion: 500_000 })).toBe(1)
  })

  const price = fc.oneof(
    fc.constantFrom(0, 1, 7, 999_999, 1_000_000, 1_000_001),
    fc.integer({ min: 0, max: 30_000_000 }),
    fc.integer({ min: 0, max: 2 ** 40 }),
  )
  const rates = fc.record(
    {
      inputPerMillion: price,
      outputPerMillion: price,
      cacheInputPerMillion: price,
      cacheWritePerMillion: price,
    },
    { requiredKeys: ['inputPerMillion', 'outputPerMillion'] },
  )
  const prices: fc.Arbitrary<TextPrices> = fc
    .record({
      base: rates,
      extended: fc.option(fc.record({ threshold: fc.integer({ min: 1, max: 1_000_000 }), rates })),
    })
    .map(({ base, extended }) =>
      extended
        ? { ...base, extended: { contextTokenThreshold: extended.threshold, ...extended.rates } }
        : base,
    )
  const tokens = fc.oneof(
    fc.integer({ min: 0, max: 10 }),
    fc.integer({ min: 0, max: 2_000_000 }),
    fc.integer({ min: 0, max: 2 ** 40 }),
  )
  const split = fc.record({
    prompt: tokens,
    completion: tokens,
    cached: fc.double({ min: 0, max: 1, noNaN: true }),
  })

  test('for any prices and token counts the burn is the exact sum rounded up, the same as the upstream debits', () => {
    fc.assert(
      fc.property(prices, split, fc.double({ min: 0, max: 1, noNaN: true }), (p, t, share) => {
        const cached = Math.floor(t.cached * t.prompt)
        const written = Math.floor(share * (t.prompt - cached))
        const expected = exactBill(p, t.prompt, cached, written, t.completion)
        expect(+burnOf(usage(t.prompt, t.completion, cached, written), p)).toBe(expected)
        // within the hold of a request bounded by exactly these counts
        expect(expected).toBeLessThanOrEqual(+worstBurn(t.prompt, t.completion, p))
        if ([p, p.extended].every((r) => !r || Object.values(r).every((v) => v <= 2 ** 40))) {
          const simPrompt = { tokens: t.prompt, cached, written }
          expect(listPriceBurn(simModelOf(p), simPrompt, t.completion)).toBe(expected)
        }
      }),
      { numRuns: 2_000 },
    )
  })
})

describe('worstBurn covers every bill a request can come to', () => {
  test('the dearest prompt price and the completion, one sum, at the dearest reachable tier', () => {
    // below the threshold: 1,000 x 1.05 = 1,050; 100 x 2.75 = 275
    expect(+worstBurn(1_000, 100, glm)).toBe(1_325)
    // a bound past the threshold: 3,000 x 2.1 = 6,300; 100 x 4.125 = 412.5: 6,712.5 -> 6,713
    expect(+worstBurn(3_000, 100, glm)).toBe(6_713)
    // without cache prices: 1,000 x 0.7 = 700; 100 x 2.8 = 280
    expect(+worstBurn(1_000, 100, llama)).toBe(980)
    // 3 x 0.7 = 2.1; 3 x 2.8 = 8.4: 10.5 -> 11
    expect(+worstBurn(3, 3, llama)).toBe(11)
  })

  test('no split of a prompt within the bound, at either tier, burns more than the hold', () => {
    for (const bound of [1, 7, 1_999, 2_000, 2_001, 2_500]) {
      const hold = worstBurn(bound, 33, glm)
      for (let prompt = Math.max(0, bound - 3); prompt <= bound; prompt++) {
        for (const [c, w] of [
          [0, 0],
          [prompt, 0],
          [0, prompt],
          [Math.floor(prompt / 3), Math.floor(prompt / 3)],
          [1, 1],
        ] as const) {
          if (c + w > prompt) continue
          expect(+burnOf(usage(prompt, 33, c, w), glm)).toBeLessThanOrEqual(hold)
        }
      }
    }
  })
})

describe('readUsage', () => {
  test('reads cached_tokens and cache_creation_input_tokens from prompt_tokens_details', () => {
    expect(
      readUsage({
        prompt_tokens: 100,
        completion_tokens: 5,
        prompt_tokens_details: { cached_tokens: 60, cache_creation_input_tokens: 30 },
      }),
    ).toEqual({ promptTokens: 100, completionTokens: 5, cachedTokens: 60, cacheWriteTokens: 30 })
    // writes beside the details, as some upstreams put them
    expect(readUsage({ prompt_tokens: 100, completion_tokens: 5, cache_creation_input_tokens: 30 })).toEqual({
      promptTokens: 100,
      completionTokens: 5,
      cacheWriteTokens: 30,
    })
    expect(readUsage({ prompt_tokens: 100, completion_tokens: 5 })).toEqual({
      promptTokens: 100,
      completionTokens: 5,
    })
  })

  test('cache counts that are not counts, or do not fit in the prompt, are dropped: all at input', () => {
    for (const details of [
      { cached_tokens: 80, cache_creation_input_tokens: 30 },
      { cached_tokens: 101 },
      { cache_creation_input_tokens: 1e20 },
    ]) {
      const read = readUsage({ prompt_tokens: 100, completion_tokens: 5, prompt_tokens_details: details })
      expect(read).toEqual({ promptTokens: 100, completionTokens: 5 })
    }
    for (const bad of [-1, 1.5, '40', null, Number.NaN]) {
      const read = readUsage({
        prompt_tokens: 100,
        completion_tokens: 5,
        prompt_tokens_details: { cached_tokens: bad },
      })
      expect(read).toEqual({ promptTokens: 100, completionTokens: 5 })
    }
    expect(readUsage({ prompt_tokens: 100, completion_tokens: 5, prompt_tokens_details: 'x' })).toEqual({
      promptTokens: 100,
      completionTokens: 5,
    })
  })
})

describe('the prompt of a partial report', () => {
  test('read without a completion count, its cache split with it; nothing without a prompt count', () => {
    const details = { cached_tokens: 60, cache_creation_input_tokens: 30 }
    expect(readPromptUsage({ prompt_tokens: 100, prompt_tokens_details: details })).toEqual({
      promptTokens: 100,
      completionTokens: 0,
      cachedTokens: 60,
      cacheWriteTokens: 30,
    })
    expect(readPromptUsage({ prompt_tokens: 100, completion_tokens: 'x' })).toEqual({
      promptTokens: 100,
      completionTokens: 0,
    })
    expect(readUsage({ prompt_tokens: 100, completion_tokens: 'x' })).toBeNull()
    for (const bad of [null, 'x', {}, { prompt_tokens: -1 }, { prompt_tokens: 1.5 }]) {
      expect(readPromptUsage(bad)).toBeNull()
    }
  })

  test('a prompt past the bound is the bound, all at input; one within it is left as reported', () => {
    const reported = usage(1_000, 5, 600, 100)
    expect(boundedPrompt(reported, 1_000)).toBe(reported)
    expect(boundedPrompt(reported, 999)).toEqual({ promptTokens: 999, completionTokens: 5 })
  })
})

describe('reasoning tokens', () => {
  test('billed once, inside completion_tokens, never added again from its details', () => {
    const read = readUsage({
      prompt_tokens: 1_000,
      completion_tokens: 50,
      completion_tokens_details: { reasoning_tokens: 40 },
    })
    expect(read).toEqual({ promptTokens: 1_000, completionTokens: 50 })
    // 1,000 x 0.85 = 850; 50 x 2.75 = 137.5 -> 138
    expect(+burnOf(read!, glm)).toBe(988)
  })
})

describe("the upstream's own cost", () => {
  test('read from diem (else usd), rounded to the micro; unreadable is none', () => {
    expect(readCost({ diem: 0.000564, usd: 0.000564 }) as number | null).toBe(564)
    expect(readCost({ usd: 0.0012 }) as number | null).toBe(1_200)
    expect(readCost({ diem: '0.000564' }) as number | null).toBe(564)
    expect(readCost({ diem: 0.00056449 }) as number | null).toBe(564)
    expect(readCost({ diem: 1e-7 }) as number | null).toBe(0)
    for (const bad of [null, undefined, 3, {}, { diem: -1 }, { diem: 'lots' }, { diem: Number.NaN }]) {
      expect(readCost(bad)).toBeNull()
    }
  })

  test('disagrees only beyond the rounding of the bill sums', () => {
    expect(costDisagrees(564 as MicroDiem, 564 as MicroDiem)).toBe(false)
    expect(costDisagrees(564 as MicroDiem, 560 as MicroDiem)).toBe(false)
    expect(costDisagrees(564 as MicroDiem, 559 as MicroDiem)).toBe(true)
    expect(costDisagrees(564 as MicroDiem, 1_000 as MicroDiem)).toBe(true)
  })
})
