// A supplier that keeps its stream busy with nothing for the buyer (SSE comments, chunks with an
// empty delta, blank frames) is stalled all the same: each frame resets no idle time, so the stream
// is cut at SVC_STREAM_IDLE_MS after its last content and ends as any stalled stream ends, its hold
// and in-flight slots back. Bytes alone would keep the buyer's stream, its hold (renewed while in
// flight) and its slots taken for as long as the supplier liked. The buyer's keep-alives go on.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer, postOffer, sseData } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { streamSurfaces, type TricklingSupplier, tricklingSupplier } from '../helpers/trickling-supplier.ts'
import { until } from '../helpers/wait.ts'

type Trickle = 'comments' | 'empty deltas' | 'content, then comments' | 'content, then usage'

let stack: TestStack
let buyer: TestAccount
let supplier: TricklingSupplier
let trickle: Trickle = 'comments'
let offerId: string

const USAGE = { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 }
const chunk = (body: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-t', object: 'chat.completion.chunk', model: 'llama-3.3-70b', ...body })}\n\n`

/** What the supplier sends every 20 ms, for ever. */
function nothingFor(n: number): string {
  if (trickle === 'content, then usage') return chunk({ choices: [], usage: USAGE })
  if (trickle === 'empty deltas') {
    const deltas = [{}, { content: '' }, { role: 'assistant', content: null }]
    return n % 4 === 3 ? ' \n\n' : chunk({ choices: [{ index: 0, delta: deltas[n % 4]! }] })
  }
  return n % 2 === 0 ? ': keep-alive\n\n' : ': thinking\n\n'
}

beforeAll(async () => {
  supplier = tricklingSupplier(
    () =>
      trickle === 'content, then comments' || trickle === 'content, then usage'
        ? chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: 'Hello there' } }] })
        : chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] }),
    nothingFor,
    20,
  )
  stack = await startStack({
    // A supplier's frame every 20 ms: far more often than the idle time, which it must not reset.
    env: { SVC_STREAM_IDLE_MS: '1000', SVC_KEEPALIVE_MS: '100', SVC_OFFER_COOLDOWN_MS: '0' },
  })
  offerId = (await postOffer(stack, supplier.url, 40)).id
  buyer = await fundedBuyer(stack, '1.000000')
})
afterAll(async () => {
  await stack.stop()
  supplier.stop()
})

const surfaces = streamSurfaces('think hard', 64)

type Ending = {
  error?: { code: string }
  type?: string
  response?: { incomplete_details: { reason: string } }
}

/** How the stream ended, as the code of the contract's error its surface ends a stalled one with. */
function endCode(text: string): string {
  const last = sseData(text).at(-1) as Ending
  if (last.error) return last.error.code
  // Responses: response.failed when nothing came (released), response.incomplete when billed.
  if (last.type === 'response.failed') return 'provider_error'
  return last.response!.incomplete_details.reason
}

for (const surface of Object.keys(surfaces) as (keyof typeof surfaces)[]) {
  describe(`${surface}: a supplier that sends nothing for the buyer is cut at the idle time`, () => {
    for (const how of ['comments', 'empty deltas', 'content, then comments'] as Trickle[]) {
      test(how, async () => {
        trickle = how
        const before = await balances(stack, buyer.accountId)
        const { path, body } = surfaces[surface]
        const response = await keyFetch(stack, buyer.apiKey, path, {
          method: 'POST',
          json: { ...body, stream: true },
        })
        expect(response.status).toBe(200)
        // Never resolves (the test's time limit) while the supplier's trickle keeps the stream.
        const text = await response.text()
        // The buyer heard keep-alives as before (chat relays the empty chunks, which are frames to
        // it); the supplier's comments never reached it.
        if (surface === 'messages') expect(text).toContain('event: ping')
        else if (surface === 'responses' || how !== 'empty deltas') expect(text).toContain(': keep-alive\n\n')
        expect(text).not.toContain('thinking')
        const billed = how === 'content, then comments'
        expect(endCode(text)).toBe(billed ? 'stream_incomplete' : 'provider_error')
        // The supplier's call is ended, the hold and the in-flight slots are back.
        await until(() => supplier.open() === 0)
        await until(async () => (await balances(stack, buyer.accountId)).held === 0)
        const account = await stack.store.hgetall(stack.keys.account(buyer.accountId))
        expect(account.inflight).toBe('0')
        expect(await stack.store.hget(stack.keys.offer(offerId), 'inflight')).toBe('0')
        const after = await balances(stack, buyer.accountId)
        // Nothing usable is not paid for; content cut short is billed on its estimate.
        if (billed) expect(after.confirmed).toBeLessThan(before.confirmed)
        else expect(after.confirmed).toBe(before.confirmed)
      }, 15_000)
    }
  })
}

// The same report again and again is no progress: it must not hold the stream to SVC_STREAM_MAX_MS.
// Cut at the idle time, the stream is billed on the report that followed all its content.
describe('a supplier that repeats its usage chunk for ever is cut at the idle time', () => {
  const ending: Record<keyof typeof surfaces, (text: string) => void> = {
    chat: (text) => expect(sseData(text).at(-1)).toBe('[DONE]'),
    responses: (text) => expect(text).toContain('event: response.completed'),
    messages: (text) => expect(text).toContain('event: message_stop'),
  }
  for (const surface of Object.keys(surfaces) as (keyof typeof surfaces)[]) {
    test(surface, async () => {
      trickle = 'content, then usage'
      const before = await balances(stack, buyer.accountId)
      const { path, body } = surfaces[surface]
      const response = await keyFetch(stack, buyer.apiKey, path, {
        method: 'POST',
        json: { ...body, stream: true },
      })
      expect(response.status).toBe(200)
      // Never resolves (the test's time limit) while the repeated report keeps the stream.
      const text = await response.text()
      ending[surface](text)
      await until(() => supplier.open() === 0)
      const after = await balances(stack, buyer.accountId)
      expect(after.held).toBe(0)
      expect(before.confirmed - after.confirmed).toBe(expectedCost(USAGE, 40))
      expect(await stack.store.hget(stack.keys.offer(offerId), 'inflight')).toBe('0')
    }, 15_000)
  }
})
