// POST /v1/messages/count_tokens is free and shares the tokenizer with what is billed: a flood of the
// largest counts never holds up a paid request's count, and a wallet past its counts in flight gets a
// 429 in Anthropic's shape with Retry-After. A stream's message_start count is free too: it waits
// aside, taking its turn with the flood's (a batch each), never ahead of a count a charge depends on.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import { COUNTS_IN_FLIGHT } from '../../src/http/inference/messages.ts'
import { countTokens, holdTokenCounts, tokenCountsPending } from '../../src/inference/token-count.ts'
import { promptTokenCount } from '../../src/inference/tokens.ts'
import type { TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let buyer: TestAccount
let other: TestAccount

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 9 } })
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '5.000000')
  other = await fundedBuyer(stack, '5.000000')
})
afterAll(() => stack.stop())

const MODEL = 'llama-3.3-70b'
const client = (account: TestAccount) =>
  new Anthropic({ apiKey: account.apiKey, baseURL: stack.url, maxRetries: 0, timeout: 600_000 })

/** Text with no space in it, of no repeating kind: the slowest there is to count (seeded, so alike each run). */
function slowText(chars: number, seed: number): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#%&()*+,-./:;<=>?@[]^_{|}~'
  const out: string[] = []
  let state = seed
  for (let i = 0; i < chars; i++) {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648
    out.push(alphabet[(state >>> 16) % alphabet.length]!)
  }
  return out.join('')
}

/** COUNTS_IN_FLIGHT of the slowest counts on one wallet, each seconds of the tokenizer's time. */
function flood(account: TestAccount) {
  let answered = 0
  const counts = Array.from({ length: COUNTS_IN_FLIGHT }, (_, i) =>
    client(account)
      .messages.countTokens({
        model: MODEL,
        messages: [{ role: 'user', content: slowText(2_000_000, i + 1) }],
      })
      .finally(() => answered++),
  )
  return { counts, answered: () => answered }
}

describe('count_tokens beside paid requests', () => {
  test("a Messages stream asked while the largest free counts fill the tokenizer starts before any of them is answered, its message_start's input_tokens counted", async () => {
    const prompt = 'one two three four five'
    const expected = (
      await client(buyer).messages.countTokens({
        model: MODEL,
        messages: [{ role: 'user', content: prompt }],
      })
    ).input_tokens
    const free = flood(other)
    await until(() => tokenCountsPending() >= COUNTS_IN_FLIGHT)
    const stream = await client(buyer).messages.create({
      model: MODEL,
      max_tokens: 20,
      stream: true,
      messages: [{ role: 'user', content: prompt }],
    })
    let freeAnsweredAtStart = -1
    let inputTokens = -1
    const names: string[] = []
    for await (const event of stream) {
      names.push(event.type)
      if (event.type === 'message_start') {
        freeAnsweredAtStart = free.answered()
        inputTokens = event.message.usage.input_tokens
      }
    }
    expect(names.at(-1)).toBe('message_stop')
    expect(inputTokens).toBe(expected)
    expect(freeAnsweredAtStart).toBe(0)
    // The free counts are answered too, each in full.
    for (const count of await Promise.all(free.counts)) expect(count.input_tokens).toBeGreaterThan(1_000_000)
  })

  test('past its counts in flight a wallet gets a 429 rate_limit_error with Retry-After; another wallet is counted, and so is the first once its counts are answered', async () => {
    const free = flood(buyer)
    await until(() => tokenCountsPending() >= COUNTS_IN_FLIGHT)
    const ask = { model: MODEL, messages: [{ role: 'user' as const, content: 'hello' }] }
    const refused = await client(buyer)
      .messages.countTokens(ask)
      .then(
        () => null,
        (error: unknown) => error,
      )
    expect(refused).toBeInstanceOf(Anthropic.RateLimitError)
    const { status, headers, error } = refused as InstanceType<typeof Anthropic.RateLimitError>
    expect(status).toBe(429)
    expect(headers.get('retry-after')).toBe('1')
    expect(error).toMatchObject({
      type: 'error',
      error: { type: 'rate_limit_error', code: 'count_concurrency_limit' },
    })
    expect((await client(other).messages.countTokens(ask)).input_tokens).toBeGreaterThan(0)
    await Promise.all(free.counts)
    expect((await client(buyer).messages.countTokens(ask)).input_tokens).toBeGreaterThan(0)
  })
})

describe("a Messages stream's message_start count", () => {
  test('waits aside: a billed count asked after a burst of them is answered while they are all still open, and the figure is the prompt count', async () => {
    // Prose of about 100 pieces: two batches aside, so none of them can end before a billed count.
    const prompt = Array.from({ length: 15_000 }, (_, i) => `w${i % 97}ord `).join('')
    const streams = 3
    // The worker takes counts in the order they were asked: held until every one is asked.
    const release = holdTokenCounts()
    const answers = Array.from({ length: streams }, () =>
      client(buyer).messages.create({
        model: MODEL,
        max_tokens: 20,
        stream: true,
        messages: [{ role: 'user', content: prompt }],
      }),
    )
    await until(() => tokenCountsPending() >= streams)
    const openWhenBilledAnswered = countTokens('hello there, world').then(() => tokenCountsPending())
    release()
    expect(await openWhenBilledAnswered).toBe(streams)
    const expected = await promptTokenCount([{ role: 'user', content: prompt }])
    expect(
      (
        await client(buyer).messages.countTokens({
          model: MODEL,
          messages: [{ role: 'user', content: prompt }],
        })
      ).input_tokens,
    ).toBe(expected)
    for (const stream of await Promise.all(answers)) {
      const names: string[] = []
      for await (const event of stream) {
        names.push(event.type)
        if (event.type === 'message_start') expect(event.message.usage.input_tokens).toBe(expected)
      }
      expect(names[0]).toBe('message_start')
      expect(names.at(-1)).toBe('message_stop')
    }
  })
})
