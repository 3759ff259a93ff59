// An answer delivered without usage is billed on the tokenizer's estimate. A count that fails (its
// worker dies) is asked again while the clear may wait, so the buyer pays for what it received;
// only a tokenizer that cannot answer in that time leaves the attempt to the reaper, which
// releases the hold once, with nothing charged.
import { afterAll, afterEach, beforeAll, expect, test } from 'bun:test'
import { countTokens } from 'gpt-tokenizer'
import { auditAll } from '../../src/cli/audit.ts'
import { failNextTokenCounts } from '../../src/inference/token-count.ts'
import { createLogger } from '../../src/logger.ts'
import { parseMicros } from '../../src/money/units.ts'
import { adminFetch, keyFetch, logCapture, type TestAccount } from '../helpers/accounts.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import { balances, fundedBuyer, postOffer, sseData } from '../helpers/buyers.ts'
import { lockstep } from '../helpers/lockstep.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const WORDS = ['a', ' careful', ' answer', ' without', ' usage']

/** A supplier that never reports usage: it ignores stream_options.include_usage. */
function usageFreeSupplier() {
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const body = (await request.json()) as Record<string, unknown>
      const headers = { 'x-venice-balance-diem': '1000.000000' }
      const base = { id: 'x', created: 1, model: body.model }
      if (!body.stream) {
        const message = { role: 'assistant', content: WORDS.join('') }
        const choices = [{ index: 0, message, finish_reason: 'stop' }]
        return Response.json({ ...base, object: 'chat.completion', choices }, { headers })
      }
      const chunks = WORDS.map((content) => ({
        ...base,
        object: 'chat.completion.chunk',
        choices: [{ index: 0, delta: { content } }],
      }))
      const text = `${chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('')}data: [DONE]\n\n`
      return new Response(text, { headers: { ...headers, 'content-type': 'text/event-stream' } })
    },
  })
  return { url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) }
}

let stack: TestStack
let supplier: ReturnType<typeof usageFreeSupplier>
let offer: { id: string }
const logs = logCapture()
// A 600 ms lease, renewed then reaped every 50 ms in that order: a slow machine delays both alike.
const rounds = lockstep(50)

beforeAll(async () => {
  supplier = usageFreeSupplier()
  stack = await startStack({
    logger: createLogger('error', 'svc-test', logs.stream),
    tune: (config) => {
      config.market.leaseMs = 600
      config.market.every = rounds.every
      config.inference.streamClearWaitMs = 1_500
    },
  })
  offer = await postOffer(stack, supplier.url, 40)
})
afterEach(() => failNextTokenCounts(0))
afterAll(async () => {
  await stack.stop()
  rounds.stop()
  supplier.stop()
})

const messages = [{ role: 'user', content: 'Tell me something careful.' }]
const chat = (buyer: TestAccount, body: Record<string, unknown>) =>
  keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', messages, ...body },
  })
const attemptOf = (ref: string) => attemptRecord(stack.store, stack.keys.attempt(`${ref}.1`))
const earned = async () => {
  const view = (await (await adminFetch(stack, `/admin/v1/offers/${offer.id}`)).json()) as Record<
    string,
    string
  >
  return parseMicros(view.earnedUsdc!)!
}

/** The attempt is cleared on the tokenizer's estimate and everyone's books agree with its charge. */
async function expectClearedOnEstimate(
  buyer: TestAccount,
  ref: string,
  charged: number,
  earnedBefore: number,
) {
  const attempt = await attemptOf(ref)
  expect(attempt.state).toBe('cleared')
  expect(attempt.estimated).toBe('1')
  expect(Number(attempt.outputTokens)).toBe(countTokens(WORDS.join('')))
  expect(Number(attempt.inputTokens)).toBe(3 + 4 + countTokens(messages[0]!.content))
  expect(charged).toBeGreaterThan(0)
  expect(Number(attempt.costUsdc)).toBe(charged)
  const after = await balances(stack, buyer.accountId)
  expect(after.spent).toBe(charged)
  expect(after.held).toBe(0)
  expect((await earned()) - earnedBefore).toBe(charged - Number(attempt.fee ?? 0))
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
}

test('a stream without usage whose first count fails is counted again and charged', async () => {
  const buyer = await fundedBuyer(stack, '1.000000')
  const earnedBefore = await earned()
  failNextTokenCounts(1) // the worker dies under the clear's first count
  const frames = sseData(await (await chat(buyer, { stream: true })).text())
  // No usage reported: billed on the estimate, told as an incomplete stream with its cost.
  expect((frames.at(-1) as { error: { code: string } }).error.code).toBe('stream_incomplete')
  const cost = frames.at(-2) as { costUsdc: string; supportReference: string }
  await expectClearedOnEstimate(buyer, cost.supportReference, parseMicros(cost.costUsdc)!, earnedBefore)
}, 30_000)

test('a buffered answer without usage whose first count fails is counted again and charged', async () => {
  const buyer = await fundedBuyer(stack, '1.000000')
  const earnedBefore = await earned()
  failNextTokenCounts(1)
  const response = await chat(buyer, {})
  expect(response.status).toBe(200)
  const ref = response.headers.get('x-svc-support-reference')!
  const charged = parseMicros(response.headers.get('x-svc-cost-usdc')!)!
  await expectClearedOnEstimate(buyer, ref, charged, earnedBefore)
}, 30_000)

test('a tokenizer that cannot answer while the clear may wait leaves the attempt to the reaper, once', async () => {
  const buyer = await fundedBuyer(stack, '1.000000')
  const before = await balances(stack, buyer.accountId)
  const earnedBefore = await earned()
  failNextTokenCounts(Number.POSITIVE_INFINITY) // every count fails, tried again until the wait is up
  const frames = sseData(await (await chat(buyer, { stream: true })).text())
  const end = frames.at(-1) as { error: { code: string; supportReference?: string } }
  expect(end.error.code).toBe('settle_failed')
  failNextTokenCounts(0)
  const ref = end.error.supportReference!
  const attemptId = `${ref}.1`
  expect(logs.lines.some((line) => line.includes('stream clearing failed') && line.includes(attemptId))).toBe(
    true,
  )
  // The lease, no longer renewed, expires and the reaper returns the hold: nothing charged.
  await until(async () => (await attemptOf(ref)).state === 'reaped', 20)
  await until(async () => (await balances(stack, buyer.accountId)).held === 0, 20)
  // Two more reaper passes: the attempt stays reaped, nothing moves again.
  const reapedAt = await attemptOf(ref)
  const lastPass = async () => Number(await stack.store.hget(stack.keys.reaperLastRun, 'at'))
  for (let i = 0; i < 2; i++) {
    const seen = await lastPass()
    await until(async () => (await lastPass()) > seen, 5)
  }
  const after = await balances(stack, buyer.accountId)
  expect(after).toEqual(before)
  expect(await earned()).toBe(earnedBefore)
  const attempt = await attemptOf(ref)
  expect(attempt).toEqual(reapedAt)
  expect(attempt.costUsdc ?? '0').toBe('0')
  expect(attempt.lateClear).toBeUndefined()
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
}, 30_000)
