// Money against a lying supplier, a slow call and an underpriced request: a supplier of the test's
// own reports whatever usage it likes, answers as late as it likes and serves every choice of `n`;
// the buyer is never charged past what the request allows (its prompt bound, max_tokens x n) nor
// past the hold, the supplier never earns past the charge, and the books balance without a write-off.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { auditAll } from '../../src/cli/audit.ts'
import { type ChatMessageLike, promptTokenBound } from '../../src/inference/tokens.ts'
import { parseMicros } from '../../src/money/units.ts'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import { balances, expectedCost, fundedBuyer, sseData } from '../helpers/buyers.ts'
import { lockstep } from '../helpers/lockstep.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

interface Script {
  usage?: { prompt_tokens: number; completion_tokens: number }
  delayMs?: number
  choices?: number
}

/** A supplier that answers each upstream key as its script says, and keeps what it was sent. */
function lyingSupplier() {
  const scripts = new Map<string, Script>()
  const received: Record<string, unknown>[] = []
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const key = (request.headers.get('authorization') ?? '').slice(7)
      const body = (await request.json()) as Record<string, unknown>
      received.push(body)
      const script = scripts.get(key) ?? {}
      if (script.delayMs) await Bun.sleep(script.delayMs)
      const usage = script.usage ?? { prompt_tokens: 5, completion_tokens: 3 }
      const n = script.choices ?? 1
      const headers = { 'x-venice-balance-diem': '1000.000000' }
      const base = { id: 'x', created: 1, model: body.model }
      if (!body.stream) {
        const choices = Array.from({ length: n }, (_, index) => ({
          index,
          message: { role: 'assistant', content: 'hi' },
          finish_reason: 'stop',
        }))
        return Response.json({ ...base, object: 'chat.completion', choices, usage }, { headers })
      }
      const frames = [
        { ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'hi' } }] },
        { ...base, object: 'chat.completion.chunk', choices: [], usage },
      ]
      const text = `${frames.map((f) => `data: ${JSON.stringify(f)}\n\n`).join('')}data: [DONE]\n\n`
      return new Response(text, { headers: { ...headers, 'content-type': 'text/event-stream' } })
    },
  })
  return { url: `http://127.0.0.1:${server.port}`, scripts, received, stop: () => server.stop(true) }
}

let stack: TestStack
let liar: ReturnType<typeof lyingSupplier>
// A 600 ms lease, renewed then reaped every 50 ms in that order: a slow machine delays both alike.
const rounds = lockstep(50)

beforeAll(async () => {
  liar = lyingSupplier()
  stack = await startStack({
    tune: (config) => {
      config.market.leaseMs = 600
      config.market.every = rounds.every
    },
  })
})
afterAll(async () => {
  await stack.stop()
  rounds.stop()
  liar.stop()
})

/** An offer on the lying supplier under a key of its own, scripted; the only offer standing. */
async function liarOffer(askCents: number, script: Script): Promise<{ id: string }> {
  const offers = (await (await adminFetch(stack, '/admin/v1/offers')).json()) as { data: { id: string }[] }
  for (const o of offers.data) await adminFetch(stack, `/admin/v1/offers/${o.id}`, { method: 'DELETE' })
  const key = `liar-${randomUUID()}`
  liar.scripts.set(key, script)
  const response = await adminFetch(stack, '/admin/v1/offers', {
    method: 'POST',
    json: { upstreamBaseUrl: liar.url, upstreamApiKey: key, askCents, capacityDiem: '100' },
  })
  expect(response.status).toBe(201)
  return (await response.json()) as { id: string }
}

const chat = (buyer: TestAccount, body: Record<string, unknown>) =>
  keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hello' }], ...body },
  })

const attemptOf = (ref: string) => attemptRecord(stack.store, stack.keys.attempt(`${ref}.1`))
const record = async (buyer: TestAccount, ref: string) =>
  (await (await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${ref}`)).json()) as Record<string, unknown>
const offerView = async (id: string) =>
  (await (await adminFetch(stack, `/admin/v1/offers/${id}`)).json()) as Record<string, string>

describe('a supplier that inflates its usage is paid what the request allows at most', () => {
  test('50,000,000 completion tokens for max_tokens 10, buffered: charged for 10, the rest disputed', async () => {
    const offer = await liarOffer(40, { usage: { prompt_tokens: 5, completion_tokens: 50_000_000 } })
    const buyer = await fundedBuyer(stack, '5.000000')
    const response = await chat(buyer, { max_tokens: 10 })
    expect(response.status).toBe(200)
    const ref = response.headers.get('x-svc-support-reference')!
    const attempt = await attemptOf(ref)
    const charged = parseMicros(response.headers.get('x-svc-cost-usdc')!)!
    // Billed the completion at the limit the supplier was sent, within the hold.
    const billedBurn = Math.ceil((5 * 700_000 + 10 * 2_800_000) / 1e6)
    expect(billedBurn).toBeLessThan(Number(attempt.holdDiem))
    expect(Number(attempt.burn)).toBe(billedBurn)
    expect(charged).toBe(Math.ceil((billedBurn * 40) / 100))
    const reportedBurn = Math.ceil((5 * 700_000 + 50_000_000 * 2_800_000) / 1e6)
    expect(Number(attempt.disputed)).toBe(reportedBurn - billedBurn)
    expect((await record(buyer, ref)).disputedBurnDiem).not.toBe('0.000000')
    const view = await offerView(offer.id)
    // The supplier earned exactly what the buyer paid; what it claimed beyond is on its offer.
    expect(parseMicros(view.earnedUsdc!)).toBe(charged)
    expect(parseMicros(view.disputedDiem!)).toBe(Number(attempt.disputed))
    expect((await balances(stack, buyer.accountId)).spent).toBe(charged)
    const metrics = await (await adminFetch(stack, '/metrics')).text()
    expect(metrics).toMatch(/^svc_disputed_clears_total [1-9]/m)
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })

  test('10,000,000 prompt tokens on a stream: the cost frame is the prompt bound, the rest disputed', async () => {
    const offer = await liarOffer(45, { usage: { prompt_tokens: 10_000_000, completion_tokens: 2 } })
    const buyer = await fundedBuyer(stack, '5.000000')
    const frames = sseData(await (await chat(buyer, { max_tokens: 20, stream: true })).text())
    expect(frames.at(-1)).toBe('[DONE]')
    const cost = frames.at(-2) as { costUsdc: string; supportReference: string }
    const attempt = await attemptOf(cost.supportReference)
    const sent = liar.received.at(-1)!
    const bound = promptTokenBound(sent.messages as ChatMessageLike[], sent)
    const billedBurn = Math.ceil((bound * 700_000 + 2 * 2_800_000) / 1e6)
    expect(billedBurn).toBeLessThan(Number(attempt.holdDiem))
    expect(Number(attempt.burn)).toBe(billedBurn)
    expect(parseMicros(cost.costUsdc)).toBe(Math.ceil((billedBurn * 45) / 100))
    const reportedBurn = Math.ceil((10_000_000 * 700_000 + 2 * 2_800_000) / 1e6)
    expect(Number(attempt.disputed)).toBe(reportedBurn - billedBurn)
    expect(parseMicros((await offerView(offer.id)).earnedUsdc!)).toBe(parseMicros(cost.costUsdc))
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})

describe('the hold covers what the request allows', () => {
  test('n: 50 holds fifty choices, so fifty honest answers are billed in full', async () => {
    await liarOffer(40, { usage: { prompt_tokens: 9, completion_tokens: 500 }, choices: 50 })
    const buyer = await fundedBuyer(stack, '5.000000')
    const response = await chat(buyer, { max_tokens: 10, n: 50 })
    expect(response.status).toBe(200)
    expect(((await response.json()) as { choices: unknown[] }).choices).toHaveLength(50)
    const attempt = await attemptOf(response.headers.get('x-svc-support-reference')!)
    expect(attempt.disputed).toBeUndefined()
    expect(parseMicros(response.headers.get('x-svc-cost-usdc')!)).toBe(
      expectedCost({ prompt_tokens: 9, completion_tokens: 500 }, 40),
    )
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })

  test('12,000 bytes of digits hold at least 12,000 prompt tokens', async () => {
    await liarOffer(40, {})
    const buyer = await fundedBuyer(stack, '5.000000')
    const digits = '7'.repeat(12_000)
    const response = await chat(buyer, { max_tokens: 1, messages: [{ role: 'user', content: digits }] })
    expect(response.status).toBe(200)
    const attempt = await attemptOf(response.headers.get('x-svc-support-reference')!)
    const holdAtLeast = Math.ceil((12_000 * 700_000 + 1 * 2_800_000) / 1e6)
    expect(Number(attempt.holdDiem)).toBeGreaterThanOrEqual(holdAtLeast)
  })

  test('an image part holds an image bound, and a tool schema its text', async () => {
    await liarOffer(40, {})
    const buyer = await fundedBuyer(stack, '5.000000')
    const plain = await chat(buyer, { max_tokens: 1 })
    const image = await chat(buyer, {
      max_tokens: 1,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'hello' },
            { type: 'image_url', image_url: { url: 'https://example.invalid/cat.png' } },
          ],
        },
      ],
    })
    const schema = { type: 'object', properties: { a: { type: 'string', description: 'x'.repeat(4_000) } } }
    const tools = await chat(buyer, {
      max_tokens: 1,
      tools: [{ type: 'function', function: { name: 'f', parameters: schema } }],
    })
    const held = async (r: Response) =>
      Number((await attemptOf(r.headers.get('x-svc-support-reference')!)).holdDiem)
    const base = await held(plain)
    // A remote image's size is unknown before the supplier fetches it: the 16,384-token ceiling.
    expect((await held(image)) - base).toBeGreaterThanOrEqual(Math.floor((16_384 * 700_000) / 1e6))
    expect((await held(tools)) - base).toBeGreaterThanOrEqual(Math.floor((4_000 * 700_000) / 1e6))
  })
})

describe('a request that names no token limit fits the balance', () => {
  test('a small balance gets an answer with the limit it affords, sent to the supplier', async () => {
    await liarOffer(40, {})
    // 500 micro-USDC at 40 cents buys 1,250 micro-DIEM: about 440 output tokens at 2.80 per million.
    const buyer = await fundedBuyer(stack, '0.000500')
    const sentBefore = liar.received.length
    const response = await chat(buyer, {})
    expect(response.status).toBe(200)
    const sent = liar.received[sentBefore]!
    expect(sent.max_tokens).toBeGreaterThanOrEqual(256)
    expect(sent.max_tokens).toBeLessThan(4096)
    const attempt = await attemptOf(response.headers.get('x-svc-support-reference')!)
    expect(Number(attempt.holdUsdc)).toBeLessThanOrEqual(500)
  })

  test('below the floor it is the 402; a request naming its limit is never lowered', async () => {
    await liarOffer(40, {})
    const poor = await fundedBuyer(stack, '0.000100')
    const before = await balances(stack, poor.accountId)
    expect((await chat(poor, {})).status).toBe(402)
    const named = await fundedBuyer(stack, '0.000500')
    expect((await chat(named, { max_tokens: 4_000 })).status).toBe(402)
    expect(await balances(stack, poor.accountId)).toEqual(before)
  })
})

test('a buffered call slower than its lease keeps its hold: no second request is admitted on it', async () => {
  // 2 s against a 600 ms lease reaped every 50 ms: the call renews its lease while it waits.
  await liarOffer(40, { delayMs: 2_000 })
  const buyer = await fundedBuyer(stack, '0.006000')
  const slow = chat(buyer, { max_tokens: 4_000 })
  // Its hold in place (however long admission takes here), then longer than the lease.
  await until(async () => (await balances(stack, buyer.accountId)).held > 0)
  // A reaper pass begun after the lease's first deadline: unrenewed, the hold would be gone by now.
  const [, deadline] = await stack.store.zrange(stack.keys.leases, 0, 0, 'WITHSCORES')
  const passAt = async () => Number(await stack.store.hget(stack.keys.reaperLastRun, 'at'))
  await until(async () => (await passAt()) > Number(deadline))
  const seen = await passAt()
  await until(async () => (await passAt()) > seen)
  // The first hold (4,000 tokens at 40 cents: about 4,500 micro-USDC) leaves too little for a second.
  const second = await chat(buyer, { max_tokens: 4_000 })
  expect(second.status).toBe(402)
  const first = await slow
  expect(first.status).toBe(200)
  const attempt = await attemptOf(first.headers.get('x-svc-support-reference')!)
  expect(attempt.state).toBe('cleared')
  expect(attempt.lateClear).toBeUndefined()
  expect((await balances(stack, buyer.accountId)).held).toBe(0)
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
}, 60_000) // a hang guard
