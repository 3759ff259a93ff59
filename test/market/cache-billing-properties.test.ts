// Property test: random cache and long-prompt prices, random chat bodies held through validateChat,
// and random usage (cache reads, cache writes, prompts on either side of the threshold, reports
// whose cache counts do not fit) read by readUsage and cleared by clearUsage through the real
// clear script on a real Redis. The burn must be the upstream's formula, never above the hold.
import { afterAll, expect, test } from 'bun:test'
import fc from 'fast-check'
import type { TextPrices, TokenRates } from '../../src/catalog/entry.ts'
import { type ChatBody, fitChat, type TextModel, validateChat } from '../../src/inference/chat-request.ts'
import { clearUsage } from '../../src/inference/clear-usage.ts'
import { readUsage } from '../../src/inference/meter.ts'
import { type ChatMessageLike, promptFieldsOf } from '../../src/inference/tokens.ts'
import { marketSteps } from '../../src/market/steps.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import {
  admitFor,
  admitted,
  type MarketFixture,
  marketFixture,
  postOffer,
  seedAccount,
} from '../helpers/market.ts'

const fixtures: MarketFixture[] = []
afterAll(() => {
  for (const f of fixtures) f.close()
})

const CAPACITY = 4_000_000_000_000_000
const BALANCE = 1_000_000_000_000

const price = fc.oneof(fc.constantFrom(0, 1, 7, 999_999, 1_000_000), fc.integer({ min: 0, max: 30_000_000 }))
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
    extended: fc.option(fc.record({ threshold: fc.integer({ min: 1, max: 3_000 }), rates }), { freq: 2 }),
  })
  .map(({ base, extended }) =>
    extended ? { ...base, extended: { contextTokenThreshold: extended.threshold, ...extended.rates } } : base,
  )

const body = fc.record({
  messages: fc.array(
    fc.record({
      role: fc.constantFrom('system', 'user', 'assistant'),
      content: fc.oneof(fc.string({ maxLength: 60 }), fc.constant('markets clear '.repeat(400))),
    }),
    { minLength: 1, maxLength: 4 },
  ),
  max_tokens: fc.integer({ min: 1, max: 8_192 }),
  n: fc.integer({ min: 1, max: 4 }),
})

/** A share of what a request allows: often none or all of it, where the bounds are tested. */
const fraction = fc.oneof(fc.constantFrom(0, 1), fc.double({ min: 0, max: 1, noNaN: true }))
const report = fc.record({
  prompt: fraction,
  completion: fraction,
  cached: fraction,
  written: fraction,
  /** The cache counts are inflated past the prompt: a report that does not add up. */
  inconsistent: fc.boolean(),
  /** The upstream's own cost: its formula's, or off by this many micro-DIEM. */
  costOff: fc.option(fc.integer({ min: -1_000_000, max: 1_000_000 }), { freq: 2 }),
})

const cases = fc.record({
  prices,
  askCents: fc.integer({ min: 1, max: 100 }),
  feeBps: fc.integer({ min: 0, max: 10_000 }),
  requests: fc.array(fc.record({ body, report }), { minLength: 1, maxLength: 4 }),
})

/**
 * The upstream's bill, computed apart from the meter: prompt tokens at input, cache reads at
 * cache_input, writes at cache_write (an unpublished one is input), completion at output, all at the
 * extended tier past its threshold; the whole sum exact, rounded up once.
 */
function upstreamFormula(p: TextPrices, prompt: number, cached: number, written: number, completion: number) {
  const tier: TokenRates = p.extended && prompt > p.extended.contextTokenThreshold ? p.extended : p
  const term = (tokens: number, price: number) => BigInt(tokens) * BigInt(price)
  const micro =
    term(prompt - cached - written, tier.inputPerMillion) +
    term(cached, tier.cacheInputPerMillion ?? tier.inputPerMillion) +
    term(written, tier.cacheWritePerMillion ?? tier.inputPerMillion) +
    term(completion, tier.outputPerMillion)
  return Number((micro + 999_999n) / 1_000_000n)
}

test('burn is the upstream formula for any cache and long-prompt usage, and never above the hold', async () => {
  await fc.assert(
    fc.asyncProperty(cases, async ({ prices, askCents, feeBps, requests }) => {
      const fx = marketFixture()
      fixtures.push(fx)
      const model: TextModel = {
        id: 'prop-model',
        prices,
        contextTokens: 131_072,
        maxCompletionTokens: 8_192,
      }
      const accountId = await seedAccount(fx, BALANCE, 100)
      await postOffer(fx, askCents, CAPACITY)
      for (const { body: sent, report: r } of requests) {
        const chat = validateChat(sent as unknown as ChatBody, model, 4_096)
        const prompt = Math.floor(r.prompt * chat.promptTokenBound)
        const completion = Math.floor(r.completion * chat.maxTokens * chat.choices)
        let cached = Math.floor(r.cached * prompt)
        let written = Math.floor(r.written * (prompt - cached))
        if (r.inconsistent) {
          cached += prompt + 1
          written += 1
        }
        const honest = r.inconsistent
          ? upstreamFormula(prices, prompt, 0, 0, completion)
          : upstreamFormula(prices, prompt, cached, written, completion)
        const usage = readUsage({
          prompt_tokens: prompt,
          completion_tokens: completion,
          total_tokens: prompt + completion,
          prompt_tokens_details: { cached_tokens: cached, cache_creation_input_tokens: written },
        })
        const admission = admitted(
          await admitFor(fx, accountId, { holdDiem: chat.holdDiem, model: model.id }),
        )
        const upstreamCost = r.costOff === null ? honest : Math.max(0, honest + r.costOff)
        const clearing = await clearUsage(
          { steps: marketSteps(fx.store, fx.keys), feeBps },
          {
            chat,
            messages: sent.messages as ChatMessageLike[],
            promptFields: promptFieldsOf(chat.upstreamBody),
            admission,
            preBalance: null,
            reported: usage,
            upstreamCost: upstreamCost as MicroDiem,
            generatedTokens: async () => completion,
            outcome: 'completed',
          },
        )
        // The burn the script billed is the upstream's bill, all of it within the hold.
        expect(clearing.burn as number).toBe(honest)
        expect(clearing.disputed as number).toBe(0)
        expect(honest).toBeLessThanOrEqual(chat.holdDiem)
        expect(honest).toBeLessThanOrEqual(admission.holdDiem as number)
        expect(clearing.charged as number).toBe(Math.ceil((honest * askCents) / 100))
        const attempt = await attemptRecord(fx.store, fx.keys.attempt(admission.attemptId))
        expect(Number(attempt.burn)).toBe(honest)
        expect(Number(attempt.inputTokens)).toBe(prompt)
        // The upstream's cost is recorded only where it disagrees beyond rounding; it never bills.
        const disagrees = Math.abs(upstreamCost - honest) > 4
        expect(attempt.upstreamCost).toBe(disagrees ? String(upstreamCost) : undefined)
      }
    }),
    { numRuns: 60 },
  )
})

test('a limit fitted to the balance is held within it at every tier, and one token more would not be', () => {
  fc.assert(
    fc.property(
      prices,
      body,
      fc.integer({ min: 1, max: 100 }),
      fc.double({ min: 0.3, max: 1, noNaN: true }),
      (prices, sent, askCents, share) => {
        const model: TextModel = {
          id: 'prop-model',
          prices,
          contextTokens: 131_072,
          maxCompletionTokens: 8_192,
        }
        const { max_tokens: _limit, ...unlimited } = sent
        const chat = validateChat(unlimited as unknown as ChatBody, model, 8_192)
        // A balance short of the full hold by a random share: where fitting has work to do.
        const confirmed = Math.floor(share * Math.ceil((chat.holdDiem * askCents) / 100))
        const fitted = fitChat(chat, confirmed, askCents)
        if (!fitted) return
        expect(fitted.maxTokens).toBeLessThan(chat.maxTokens)
        expect(Math.ceil((fitted.holdDiem * askCents) / 100)).toBeLessThanOrEqual(confirmed)
        const more = validateChat(
          { ...unlimited, max_tokens: fitted.maxTokens + 1 } as unknown as ChatBody,
          model,
          8_192,
        )
        expect(Math.ceil((more.holdDiem * askCents) / 100)).toBeGreaterThan(confirmed)
      },
    ),
    { numRuns: 1_000 },
  )
})
