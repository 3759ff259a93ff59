// Property test: random chat bodies become holds through validateChat, and random supplier reports
// (honest, inflated, zero, missing, late, replayed) are cleared by the real scripts on a real
// Redis. After every clear the money moved is checked against what the rules allow, from Redis.
import { afterAll, expect, test } from 'bun:test'
import fc from 'fast-check'
import {
  type ChatBody,
  type TextModel,
  type ValidChat,
  validateChat,
} from '../../src/inference/chat-request.ts'
import { estimateUsage } from '../../src/inference/clear-usage.ts'
import { burnOf } from '../../src/inference/meter.ts'
import { type ChatMessageLike, promptFieldsOf } from '../../src/inference/tokens.ts'
import type { Admission } from '../../src/market/admission.ts'
import { auditMarket, listWriteOffs } from '../../src/market/audit.ts'
import { clear, release } from '../../src/market/clearing.ts'
import { reapExpired } from '../../src/market/leases.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import {
  admitFor,
  admitted,
  type MarketFixture,
  marketFixture,
  marketOn,
  postOffer,
  seedAccount,
} from '../helpers/market.ts'
import { flushAll, ownRedis } from '../helpers/stack.ts'

// A server (or Cluster) of its own, emptied after each run: each run's audit scans the whole keyspace
// for its prefix, so keys left by earlier runs (or by other files on a shared server) would slow
// every later one.
await ownRedis({ like: 'run' })
// One connection for every run; each run has its own prefix, so its audit sees only its market.
const connection = marketFixture()
afterAll(() => connection.close())

const DEFAULT_MAX_TOKENS = 4096
/** Room for every hold a case makes (and the holds that drain a balance): far below 2^53. */
const CAPACITY = 4_000_000_000_000_000
const BALANCE = 1_000_000_000_000

// ---- request shapes ----

const be32 = (n: number) => [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]
/** The first bytes of a PNG of that size: all a hold reads of it. */
const pngDataUrl = (w: number, h: number) =>
  `data:image/png;base64,${Buffer.from([0x89, 0x50, 0x4e, 0x47, 13, 10, 26, 10, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, ...be32(w), ...be32(h), 8, 6, 0, 0, 0]).toString('base64')}`

const text = fc
  .array(
    fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 40 }),
      fc.string({ unit: fc.constantFrom(...'0123456789'), maxLength: 300 }),
      fc.constantFrom('日本語の文章', '汉字与数字 42', '🎉🚀👩‍👩‍👧‍👦', '<|im_start|>', ' \n'),
    ),
    { maxLength: 6 },
  )
  .map((parts) => parts.join(''))

const imagePart = fc.oneof(
  fc
    .record({ w: fc.integer({ min: 1, max: 9000 }), h: fc.integer({ min: 1, max: 9000 }) })
    .map(({ w, h }) => ({ type: 'image_url', image_url: { url: pngDataUrl(w, h), detail: 'high' } })),
  fc.constant({ type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } }),
  // a text part that also carries an image_url: read by its type, as text
  text.map((t) => ({ type: 'text', text: t, image_url: 'https://example.com/dog.png' })),
)
const part = fc.oneof(
  text.map((t) => ({ type: 'text', text: t })),
  imagePart,
)

const message = fc.oneof(
  fc.record({ role: fc.constantFrom('system', 'developer', 'user', 'assistant'), content: text }),
  fc.record({ role: fc.constant('user'), content: fc.array(part, { minLength: 1, maxLength: 4 }) }),
  fc.record({
    role: fc.constant('assistant'),
    content: fc.constant(null),
    tool_calls: fc.array(fc.record({ id: text, function: fc.record({ name: text, arguments: text }) }), {
      minLength: 1,
      maxLength: 2,
    }),
  }),
  fc.record({ role: fc.constant('tool'), tool_call_id: text, content: text }),
)

const json = fc.jsonValue({ maxDepth: 3 })

const body = fc.record(
  {
    messages: fc.array(message, { minLength: 1, maxLength: 4 }),
    n: fc.integer({ min: 1, max: 8 }),
    max_tokens: fc.integer({ min: 1, max: 32_768 }),
    tools: fc.array(
      fc.record({
        type: fc.constant('function'),
        function: fc.record({ name: text, description: text, parameters: json }),
      }),
      { maxLength: 2 },
    ),
    tool_choice: fc.constantFrom('auto', 'required', { type: 'function', function: { name: 'f' } }),
    response_format: fc.record({
      type: fc.constant('json_schema'),
      json_schema: fc.record({ name: text, schema: json }),
    }),
    prediction: fc.record({ type: fc.constant('content'), content: text }),
  },
  { requiredKeys: ['messages'] },
)

/** Per-million prices in micro-DIEM: free, tiny, odd and frontier-priced models. */
const prices = fc.constantFrom(
  { inputPerMillion: 0, outputPerMillion: 1 },
  { inputPerMillion: 1, outputPerMillion: 1 },
  { inputPerMillion: 7, outputPerMillion: 0 },
  { inputPerMillion: 150_000, outputPerMillion: 600_000 },
  { inputPerMillion: 1_234_567, outputPerMillion: 9_876_543 },
  { inputPerMillion: 3_000_000, outputPerMillion: 15_000_000 },
)

// ---- supplier reports ----

const fraction = fc.double({ min: 0, max: 1, noNaN: true })
const report = fc.oneof(
  fc.record({ kind: fc.constant('honest' as const), prompt: fraction, completion: fraction }),
  fc.record({
    kind: fc.constant('inflated' as const),
    excess: fc.oneof(
      fc.integer({ min: 1, max: 1_000_000_000 }),
      fc.constantFrom(1, Number.MAX_SAFE_INTEGER, 2 ** 60),
    ),
  }),
  fc.record({ kind: fc.constant('zero' as const) }),
  // no usage: the tokenizer's count, the generated tokens capped at max_tokens x n
  fc.record({ kind: fc.constant('missing' as const), generated: fc.double({ min: 0, max: 4, noNaN: true }) }),
)

type Report = typeof report extends fc.Arbitrary<infer T> ? T : never

const request = fc.record({
  body,
  report,
  feeBps: fc.oneof(fc.constantFrom(0, 1, 250, 9_999, 10_000), fc.integer({ min: 0, max: 10_000 })),
  /** The lease runs out and is reaped before the clear; then, maybe, the balance is drained to
   * `drain` of the cost and the offer's capacity squeezed to `squeeze` of the billable burn. */
  late: fc.option(fc.record({ drain: fc.option(fraction), squeeze: fc.option(fraction) }), { freq: 3 }),
  replay: fc.option(fc.record({ burn: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }) }), { freq: 3 }),
})

const chatCase = fc.record({
  prices,
  askCents: fc.oneof(fc.constantFrom(1, 33, 50, 99, 100), fc.integer({ min: 1, max: 100 })),
  requests: fc.array(request, { minLength: 1, maxLength: 5 }),
})

// ---- reading money from Redis ----

interface Money {
  confirmed: number
  held: number
  spent: number
  writtenOff: number
  capacity: number
  burned: number
  earned: number
  fees: number
  /** Reported beyond what was billed: may pass 2^53, so read exactly. */
  disputed: bigint
}

async function money(fx: MarketFixture, accountId: string, offerId: string): Promise<Money> {
  const [a, o] = await Promise.all([
    fx.store.hgetall(fx.keys.account(accountId)),
    fx.store.hgetall(fx.keys.offer(offerId)),
  ])
  const num = (v: string | undefined) => {
    const n = Number(v ?? 0)
    expect(Number.isSafeInteger(n)).toBe(true)
    return n
  }
  return {
    confirmed: num(a.confirmed),
    held: num(a.held),
    spent: num(a.spent),
    writtenOff: num(a.writtenOff),
    capacity: num(o.capacity),
    burned: num(o.burned),
    earned: num(o.earned),
    fees: num(o.fees),
    disputed: BigInt(o.disputed ?? 0),
  }
}

const ceilDiv = (n: number, d: number) => Number((BigInt(n) + BigInt(d) - 1n) / BigInt(d))

/** The reported burn as the script sees it: a count past a safe integer is only more disputed. */
const asReported = (burn: number) => Math.min(burn, Number.MAX_SAFE_INTEGER)

async function reportedBurn(
  r: Report,
  chat: ValidChat,
  messages: ChatMessageLike[],
  admission: Admission,
): Promise<{ burn: number; estimated: boolean }> {
  const held = admission.holdDiem as number
  switch (r.kind) {
    case 'honest': {
      const usage = {
        promptTokens: Math.floor(r.prompt * chat.promptTokenBound),
        completionTokens: Math.floor(r.completion * chat.maxTokens * chat.choices),
      }
      const burn = burnOf(usage, chat.model.prices)
      expect(burn).toBeLessThanOrEqual(held)
      return { burn, estimated: false }
    }
    case 'inflated':
      return { burn: held + r.excess, estimated: false }
    case 'zero':
      return { burn: 0, estimated: false }
    case 'missing': {
      const generated = Math.floor(r.generated * chat.maxTokens * chat.choices)
      const usage = await estimateUsage({
        chat,
        messages,
        promptFields: promptFieldsOf(chat.upstreamBody),
        admission,
        preBalance: null,
        reported: null,
        generatedTokens: async () => generated,
        outcome: 'incomplete',
      })
      const burn = burnOf(usage, chat.model.prices)
      // the tokenizer's count never passes the hold's bound: an estimate is never disputed
      expect(burn).toBeLessThanOrEqual(held)
      return { burn, estimated: true }
    }
  }
}

/** The lease's deadline moved into the past (as if its time had run out), then the reaper's pass. */
async function reapedNow(fx: MarketFixture, attemptId: string): Promise<void> {
  expect(await fx.store.zadd(fx.keys.leases, 'XX', 'CH', 1, attemptId)).toBe(1)
  await reapExpired(fx.store, fx.keys)
  expect((await attemptRecord(fx.store, fx.keys.attempt(attemptId))).state).toBe('reaped')
}

test('every clear of a random request and report moves money within the hold and the rules', async () => {
  await fc.assert(
    fc.asyncProperty(chatCase, async ({ prices, askCents, requests }) => {
      const fx = marketOn(connection)
      const model: TextModel = {
        id: 'prop-model',
        prices,
        contextTokens: 131_072,
        maxCompletionTokens: 32_768,
      }
      const accountId = await seedAccount(fx, BALANCE, 100)
      const offerId = await postOffer(fx, askCents, CAPACITY)
      const blockers: string[] = []
      const writeOffs = new Map<string, number>()

      for (const req of requests) {
        const chat = validateChat(req.body as unknown as ChatBody, model, DEFAULT_MAX_TOKENS)
        const messages = req.body.messages as ChatMessageLike[]
        const admission = admitted(
          await admitFor(fx, accountId, {
            holdDiem: chat.holdDiem,
            leaseMs: req.late ? 5 : 60_000,
            model: model.id,
          }),
        )
        expect(Number(admission.holdUsdc)).toBe(ceilDiv(chat.holdDiem * askCents, 100))
        const { burn, estimated } = await reportedBurn(req.report, chat, messages, admission)
        const reported = asReported(burn)
        const holdDiem = admission.holdDiem as number

        if (req.late) {
          await reapedNow(fx, admission.attemptId)
          const now = await money(fx, accountId, offerId)
          const billable = Math.min(reported, holdDiem)
          if (req.late.drain !== null) {
            // Another request holds all but `drain` of this one's cost (at least 0).
            const keep = Math.floor(req.late.drain * ceilDiv(billable * askCents, 100))
            const estimate = Math.floor(((now.confirmed - keep) * 100) / askCents)
            if (estimate > 0) {
              const b = admitted(await admitFor(fx, accountId, { holdDiem: estimate as MicroDiem }))
              blockers.push(b.attemptId)
            }
          }
          if (req.late.squeeze !== null) {
            const o = await fx.store.hmget(fx.keys.offer(offerId), 'burned', 'held')
            const floor = Number(o[0]) + Number(o[1])
            await fx.offers.update(offerId, {
              capacity: (floor + Math.floor(req.late.squeeze * billable)) as MicroDiem,
            })
          }
        }

        const before = await money(fx, accountId, offerId)
        const clearing = await clear(fx.store, fx.keys, {
          attemptId: admission.attemptId,
          burn: burn as MicroDiem,
          feeBps: req.feeBps,
          upstreamBalanceAfter: null,
          inputTokens: 1,
          outputTokens: 1,
          estimated,
          outcome: 'completed',
        })
        const after = await money(fx, accountId, offerId)
        const record = await attemptRecord(fx.store, fx.keys.attempt(admission.attemptId))

        // Billed: the report capped at the hold and at the capacity the offer had left.
        const billed = Math.min(reported, holdDiem, Math.max(0, before.capacity - before.burned))
        const cost = ceilDiv(billed * askCents, 100)
        const charged = req.late ? Math.min(cost, before.confirmed) : cost
        const fee = Math.floor((charged * req.feeBps) / 10_000)
        expect(clearing.replay).toBe(false)
        expect(clearing.burn).toBe(billed as MicroDiem)
        expect(Number(record.burn)).toBe(billed)
        expect(Number(clearing.charged)).toBe(charged)
        expect(Number(record.costUsdc)).toBe(charged)
        if (req.late) expect(charged).toBeLessThanOrEqual(before.confirmed)
        else expect(charged).toBeLessThanOrEqual(admission.holdUsdc)

        // The buyer pays what was charged, out of the hold (or the balance, late), nothing more.
        expect(after.spent - before.spent).toBe(charged)
        if (req.late) {
          expect(before.confirmed - after.confirmed).toBe(charged)
          expect(after.held).toBe(before.held)
        } else {
          expect(after.confirmed - before.confirmed).toBe(admission.holdUsdc - charged)
          expect(after.held - before.held).toBe(-admission.holdUsdc)
        }
        // The supplier earns exactly the charge less the fee; the fee is the market's.
        expect(after.earned - before.earned).toBe(charged - fee)
        expect(after.fees - before.fees).toBe(fee)
        expect(after.burned - before.burned).toBe(billed)
        // Whatever was reported beyond what was billed is disputed, on the attempt and the offer.
        const disputed = BigInt(reported) - BigInt(billed)
        expect(BigInt(record.disputed ?? 0)).toBe(disputed)
        expect(BigInt(clearing.disputed)).toBe(disputed)
        // the offer's total is exact until it would pass 2^53, then stays there
        const total = before.disputed + disputed
        const cap = BigInt(Number.MAX_SAFE_INTEGER)
        expect(after.disputed).toBe(total > cap ? cap : total)
        if (req.report.kind !== 'inflated' && (req.late?.squeeze ?? null) === null) expect(disputed).toBe(0n)
        // A write-off only on a late clear, for what the balance could not pay.
        const writtenOff = req.late ? cost - charged : 0
        expect(after.writtenOff - before.writtenOff).toBe(writtenOff)
        expect(Number(clearing.writtenOff)).toBe(writtenOff)
        if (writtenOff > 0) writeOffs.set(admission.attemptId, writtenOff)
        expect(record.lateClear === '1').toBe(req.late !== null)
        expect(record.estimated === '1').toBe(estimated)

        if (req.replay) {
          // The same result delivered again, with any burn: the first clear stands, nothing moves.
          const again = await clear(fx.store, fx.keys, {
            attemptId: admission.attemptId,
            burn: req.replay.burn as MicroDiem,
            feeBps: req.feeBps,
            upstreamBalanceAfter: null,
            inputTokens: 9,
            outputTokens: 9,
            estimated: false,
            outcome: 'completed',
          })
          expect(again.replay).toBe(true)
          expect(Number(again.charged)).toBe(charged)
          expect(again.burn).toBe(billed as MicroDiem)
          expect(await money(fx, accountId, offerId)).toEqual(after)
          expect(await attemptRecord(fx.store, fx.keys.attempt(admission.attemptId))).toEqual(record)
        }
        // The next request finds the balance and the capacity as they were.
        for (const attemptId of blockers.splice(0)) {
          await release(fx.store, fx.keys, {
            attemptId,
            errorCode: 'test',
            cooldownMs: 0,
            upstreamBalance: null,
          })
        }
        if ((req.late?.squeeze ?? null) !== null) {
          await fx.offers.update(offerId, { capacity: CAPACITY as MicroDiem })
        }
      }

      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
      const listed = await listWriteOffs(fx.store, fx.keys)
      expect(new Map(listed.map((w) => [w.attemptId, w.amount]))).toEqual(writeOffs)
      for (const w of listed) expect(w.accountId).toBe(accountId)
      await flushAll(fx.store)
    }),
    { numRuns: 400 },
  )
  // A hang guard only: 400 runs are CPU work that a busy machine may stretch several times over.
}, 300_000)
