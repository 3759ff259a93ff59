// Periodic key budgets over real HTTP on a real Redis, with the simulated supplier and the openai
// and Anthropic SDKs: a key minted with limitUsdc and limitReset spends up to its limit in the
// period, is refused 403 key_limit_exceeded (with when it resets) on chat and Responses (the openai
// SDK), Messages (the Anthropic SDK, a permission_error), images and video, and spends again once
// the period moved on;
// GET /v1/agent/keys shows what it spent in the period and when it resets; bad input is a 400 that
// changes nothing, and a limited key binds the periods too.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { type LimitReset, periodEnd, periodStart } from '../../src/accounts/budget-periods.ts'
import { auditAll } from '../../src/cli/audit.ts'
import { formatMicros } from '../../src/money/units.ts'
import {
  keyFetch,
  type ListedKey,
  listedKey,
  type MintedKey,
  mintKey,
  type TestAccount,
  waitForLastUsed,
} from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startStack({ sim: { videoJobMs: 100 } })
  await simOffer(stack, 40, { capacityDiem: '1000' })
})
afterAll(() => stack.stop())

type KeyView = ListedKey
type Minted = MintedKey
type ErrorBody = { error: { code: string } & Record<string, unknown> }

const call = (apiKey: string, path: string, init: RequestInit & { json?: unknown } = {}) =>
  keyFetch(stack, apiKey, path, init)
const mint = (buyer: TestAccount, json: Record<string, unknown>) => mintKey(stack, buyer.apiKey, json)
const listed = async (buyer: TestAccount, id: string) => (await listedKey(stack, buyer.apiKey, id))!
const patch = (apiKey: string, id: string, json: unknown) =>
  call(apiKey, `/v1/agent/keys/${id}`, { method: 'PATCH', json })

/** Redis's clock (the scripts'), ms. */
async function redisNow(): Promise<number> {
  const [seconds, micros] = await stack.store.time()
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
}
/** When the period of `kind` holding Redis's clock ends: either of two, should a boundary pass meanwhile. */
async function resetsAround(kind: LimitReset, run: () => Promise<unknown>) {
  const before = await redisNow()
  await run()
  const after = await redisNow()
  return [before, after].map((ms) => new Date(periodEnd(kind, periodStart(kind, ms))).toISOString())
}

/** The key's period as if what it spent had been spent in the period before: the period moved on. */
async function movePeriodBack(accountId: string, keyId: string) {
  const account = stack.keys.account(accountId)
  const start = Number(await stack.store.hget(account, `pstart:${keyId}`))
  await stack.store.hset(account, `pstart:${keyId}`, start - 86_400_000)
}

/** A refusal as the test reads it: the status and the error object, whichever client's shape it came in. */
interface Refusal {
  status: number
  error: Record<string, unknown>
}

/**
 * Sends small requests through `send` until the key's budget refuses one: what they were charged,
 * and the refusal.
 */
async function spendUntilRefused(send: () => Promise<Response>) {
  let charged = 0
  for (let i = 0; i < 40; i++) {
    try {
      const response = await send()
      charged += Math.round(Number(response.headers.get('x-svc-cost-usdc')) * 1e6)
    } catch (error) {
      return { charged, refusal: refusalOf(error) }
    }
  }
  throw new Error('the budget never refused a request')
}

/** openai's APIError holds the body's `error`; Anthropic's the whole body, `{type: "error", error}`. */
function refusalOf(error: unknown): Refusal {
  if (error instanceof OpenAI.APIError)
    return { status: error.status!, error: error.error as Refusal['error'] }
  if (error instanceof Anthropic.APIError) {
    const body = error.error as { type: string; error: Refusal['error'] }
    expect(body.type).toBe('error')
    return { status: error.status!, error: body.error }
  }
  throw error
}

const openai = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })

const routes: Record<string, (apiKey: string) => () => Promise<Response>> = {
  chat: (apiKey) => () =>
    openai(apiKey)
      .chat.completions.create({
        model: 'llama-3.3-70b',
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 16,
      })
      .withResponse()
      .then((r) => r.response),
  Responses: (apiKey) => () =>
    openai(apiKey)
      .responses.create({ model: 'llama-3.3-70b', input: 'hi', max_output_tokens: 16 })
      .withResponse()
      .then((r) => r.response),
  // Anthropic's client: the refusal in Anthropic's shape carries the same fields.
  Messages: (apiKey) => () =>
    new Anthropic({ apiKey, baseURL: stack.url, maxRetries: 0 }).messages
      .create({ model: 'llama-3.3-70b', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] })
      .withResponse()
      .then((r) => r.response),
}

describe('a daily budget, end to end with the SDKs', () => {
  for (const [route, sender] of Object.entries(routes)) {
    test(`${route}: spends up to the limit in the period, is refused with when it resets, then spends again in the next`, async () => {
      const buyer = await fundedBuyer(stack)
      let key: Minted | undefined
      const resets = await resetsAround('daily', async () => {
        key = await mint(buyer, { name: 'agent', limitUsdc: '0.000200', limitReset: 'daily' })
      })
      expect(key).toMatchObject({
        limitUsdc: '0.000200',
        limitReset: 'daily',
        spentUsdc: '0.000000',
        periodSpentUsdc: '0.000000',
        limitRemainingUsdc: '0.000200',
      })
      expect(resets).toContain(key!.limitResetsAt!)
      const send = sender(key!.apiKey)

      const first = await spendUntilRefused(send)
      expect(first.charged).toBeGreaterThan(0)
      expect(first.refusal.status).toBe(403)
      const error = first.refusal.error
      if (route === 'Messages') expect(error.type).toBe('permission_error')
      expect(error.code).toBe('key_limit_exceeded')
      expect(error.limitUsdc).toBe('0.000200')
      expect(resets).toContain(error.limitResetsAt as string)
      const afterFirst = await listed(buyer, key!.id)
      expect(afterFirst).toMatchObject({
        spentUsdc: formatMicros(first.charged),
        periodSpentUsdc: formatMicros(first.charged),
        limitRemainingUsdc: formatMicros(200 - first.charged),
      })

      // The period moves on: what was spent counts no more, and the key spends its limit again.
      await movePeriodBack(buyer.accountId, key!.id)
      expect(await listed(buyer, key!.id)).toMatchObject({
        spentUsdc: formatMicros(first.charged),
        periodSpentUsdc: '0.000000',
        limitRemainingUsdc: '0.000200',
      })
      const second = await spendUntilRefused(send)
      expect(second.charged).toBeGreaterThan(0)
      expect(await listed(buyer, key!.id)).toMatchObject({
        spentUsdc: formatMicros(first.charged + second.charged),
        periodSpentUsdc: formatMicros(second.charged),
      })
      expect(await auditAll(stack.store, stack.keys)).toEqual([])
    })
  }
})

/** Sends one video job: queued (its worst case held), then retrieved until its MP4 clears it. */
async function videoJob(apiKey: string): Promise<Response> {
  const queued = await call(apiKey, '/v1/video/queue', {
    method: 'POST',
    json: { model: 'wan-2.1-video', prompt: 'waves', duration: '5s' },
  })
  if (queued.status !== 200) return queued
  const { id } = (await queued.json()) as { id: string }
  // No deadline of its own: the test's time limit is the hang guard.
  for (;;) {
    const response = await call(apiKey, '/v1/video/retrieve', { method: 'POST', json: { id } })
    if (!response.headers.get('content-type')?.startsWith('application/json')) return response
    await response.json()
    await Bun.sleep(20)
  }
}

/** Every other route that holds: a request as raw HTTP, and how its refusal's error is reached. */
const otherRoutes: Record<string, { limitUsdc: string; send: (apiKey: string) => Promise<Response> }> = {
  // flux-dev: 10,000 micro-DIEM an image, 4,000 micro-USDC at 40: one image in the limit, not two.
  images: {
    limitUsdc: '0.006000',
    send: (apiKey) =>
      call(apiKey, '/v1/images/generations', { method: 'POST', json: { model: 'flux-dev', prompt: 'x' } }),
  },
  // wan-2.1-video: 250,000 micro-DIEM for 5 s, 100,000 micro-USDC at 40: one job in the limit.
  video: { limitUsdc: '0.150000', send: videoJob },
  Messages: {
    limitUsdc: '0.000200',
    send: (apiKey) =>
      fetch(`${stack.url}/v1/messages`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'anthropic-version': '2023-06-01',
          'x-api-key': apiKey,
        },
        body: JSON.stringify({
          model: 'llama-3.3-70b',
          max_tokens: 16,
          messages: [{ role: 'user', content: 'hi' }],
        }),
      }),
  },
}

/** Sends until the budget refuses: what was charged, and the refusal's status and body. */
async function sendUntilRefused(send: () => Promise<Response>) {
  let charged = 0
  for (let i = 0; i < 40; i++) {
    const response = await send()
    if (response.status !== 200) {
      return { charged, status: response.status, body: (await response.json()) as Record<string, unknown> }
    }
    charged += Math.round(Number(response.headers.get('x-svc-cost-usdc')) * 1e6)
    await response.arrayBuffer()
  }
  throw new Error('the budget never refused a request')
}

describe('a daily budget on images, video and Messages', () => {
  for (const [route, { limitUsdc, send }] of Object.entries(otherRoutes)) {
    test(`${route}: refused 403 key_limit_exceeded with when it resets, then spends again in the next period`, async () => {
      const buyer = await fundedBuyer(stack)
      let key: Minted | undefined
      const resets = await resetsAround('daily', async () => {
        key = await mint(buyer, { name: 'agent', limitUsdc, limitReset: 'daily' })
      })
      const first = await sendUntilRefused(() => send(key!.apiKey))
      expect(first.charged).toBeGreaterThan(0)
      expect(first.status).toBe(403)
      // Messages answers in Anthropic's shape, with the contract's fields beside its own.
      if (route === 'Messages')
        expect(first.body).toMatchObject({ type: 'error', error: { type: 'permission_error' } })
      const error = first.body.error as Record<string, unknown>
      expect(error).toMatchObject({ code: 'key_limit_exceeded', limitUsdc })
      expect(resets).toContain(error.limitResetsAt as string)
      expect(await listed(buyer, key!.id)).toMatchObject({
        periodSpentUsdc: formatMicros(first.charged),
        limitResetsAt: error.limitResetsAt,
      })

      await movePeriodBack(buyer.accountId, key!.id)
      const again = await send(key!.apiKey)
      expect(again.status).toBe(200)
      await again.arrayBuffer()
      expect(await listed(buyer, key!.id)).toMatchObject({
        spentUsdc: formatMicros(
          first.charged + Math.round(Number(again.headers.get('x-svc-cost-usdc')) * 1e6),
        ),
      })
      expect(await auditAll(stack.store, stack.keys)).toEqual([])
    })
  }
})

describe('setting a budget', () => {
  test('PATCH sets, changes and removes the reset; the answer and the list show it', async () => {
    const buyer = await fundedBuyer(stack)
    const key = await mint(buyer, { name: 'agent', limitUsdc: '1' })
    expect(key).toMatchObject({ limitReset: null, periodSpentUsdc: null, limitResetsAt: null })
    let answer: KeyView | undefined
    const weekly = await resetsAround('weekly', async () => {
      answer = (await (await patch(buyer.apiKey, key.id, { limitReset: 'weekly' })).json()) as KeyView
    })
    expect(answer).toMatchObject({ limitUsdc: '1.000000', limitReset: 'weekly', periodSpentUsdc: '0.000000' })
    expect(weekly).toContain(answer!.limitResetsAt!)
    expect(new Date(answer!.limitResetsAt!).getUTCDay()).toBe(1)
    const monthly = await resetsAround('monthly', async () => {
      answer = (await (
        await patch(buyer.apiKey, key.id, { limitUsdc: '2', limitReset: 'monthly' })
      ).json()) as KeyView
    })
    expect(answer).toMatchObject({ limitUsdc: '2.000000', limitReset: 'monthly' })
    expect(monthly).toContain(answer!.limitResetsAt!)
    expect(monthly).toContain((await listed(buyer, key.id)).limitResetsAt!)
    // A lifetime limit again; then no limit at all takes its reset with it.
    expect(await (await patch(buyer.apiKey, key.id, { limitReset: null })).json()).toMatchObject({
      limitUsdc: '2.000000',
      limitReset: null,
      limitResetsAt: null,
    })
    await patch(buyer.apiKey, key.id, { limitReset: 'daily' })
    expect(await (await patch(buyer.apiKey, key.id, { limitUsdc: null })).json()).toMatchObject({
      limitUsdc: null,
      limitReset: null,
      periodSpentUsdc: null,
    })
    expect(
      await stack.store.hmget(stack.keys.account(buyer.accountId), `reset:${key.id}`, `pstart:${key.id}`),
    ).toEqual([null, null])
  })

  test('a limit below what the key spent in its period is a 409 that changes nothing; once the period moved on it is not', async () => {
    const buyer = await fundedBuyer(stack)
    const key = await mint(buyer, { name: 'agent', limitUsdc: '1', limitReset: 'daily' })
    await routes.chat!(key.apiKey)()
    await waitForLastUsed(stack, key.apiKey)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const below = await patch(buyer.apiKey, key.id, { limitUsdc: '0' })
    expect(below.status).toBe(409)
    expect(((await below.json()) as ErrorBody).error.code).toBe('key_limit_below_spent')
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
    await movePeriodBack(buyer.accountId, key.id)
    expect(await (await patch(buyer.apiKey, key.id, { limitUsdc: '0' })).json()).toMatchObject({
      limitUsdc: '0.000000',
      limitReset: 'daily',
      periodSpentUsdc: '0.000000',
    })
  })

  test('an unknown limitReset, or one without a limit, is a 400 that changes nothing', async () => {
    const buyer = await fundedBuyer(stack)
    const unlimited = await mint(buyer, { name: 'free' })
    const limited = await mint(buyer, { name: 'agent', limitUsdc: '1', limitReset: 'daily' })
    await waitForLastUsed(stack, buyer.apiKey)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const mints = [
      { name: 'x', limitReset: 'daily' },
      { name: 'x', limitUsdc: '1', limitReset: 'hourly' },
      { name: 'x', limitUsdc: '1', limitReset: 'DAILY' },
      { name: 'x', limitUsdc: '1', limitReset: 1 },
      { name: 'x', limitUsdc: '1', limitReset: null },
    ]
    for (const json of mints) {
      const response = await call(buyer.apiKey, '/v1/agent/keys', { method: 'POST', json })
      expect([response.status, JSON.stringify(json)]).toEqual([400, JSON.stringify(json)])
      expect(((await response.json()) as ErrorBody).error.type).toBe('invalid_request_error')
    }
    const patches: [string, unknown][] = [
      [unlimited.id, { limitReset: 'daily' }],
      [limited.id, { limitUsdc: null, limitReset: 'weekly' }],
      [limited.id, { limitReset: 'yearly' }],
      [limited.id, { limitReset: '' }],
    ]
    for (const [id, json] of patches) {
      const response = await patch(buyer.apiKey, id, json)
      expect([response.status, JSON.stringify(json)]).toEqual([400, JSON.stringify(json)])
      expect(((await response.json()) as ErrorBody).error.type).toBe('invalid_request_error')
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })
})

describe('a limited key binds the periods too', () => {
  const expectBinding = async (response: Response) => {
    expect(response.status).toBe(403)
    expect(((await response.json()) as ErrorBody).error.code).toBe('key_limit_binding')
  }

  test('it may not change a reset, nor mint a key that resets sooner than itself; it may lower a periodic limit', async () => {
    const buyer = await fundedBuyer(stack)
    const agent = await mint(buyer, { name: 'agent', limitUsdc: '1', limitReset: 'weekly' })
    const sibling = await mint(buyer, { name: 'sibling', limitUsdc: '1', limitReset: 'daily' })
    await waitForLastUsed(stack, agent.apiKey)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    await expectBinding(await patch(agent.apiKey, agent.id, { limitReset: 'daily' }))
    await expectBinding(await patch(agent.apiKey, agent.id, { limitReset: 'monthly' }))
    await expectBinding(await patch(agent.apiKey, sibling.id, { limitReset: null }))
    await expectBinding(await patch(agent.apiKey, sibling.id, { limitUsdc: '0.5', limitReset: 'weekly' }))
    for (const json of [
      { name: 'sooner', limitUsdc: '0.1', limitReset: 'daily' },
      { name: 'free', limitReset: 'weekly' },
    ]) {
      const response = await call(agent.apiKey, '/v1/agent/keys', { method: 'POST', json })
      expect(response.status).toBe(json.limitUsdc === undefined ? 400 : 403)
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)

    // Lowering keeps the reset; a weekly or lifetime child is carved out of its limit.
    expect(await (await patch(agent.apiKey, sibling.id, { limitUsdc: '0.5' })).json()).toMatchObject({
      limitUsdc: '0.500000',
      limitReset: 'daily',
    })
    for (const limitReset of ['weekly', undefined]) {
      const response = await call(agent.apiKey, '/v1/agent/keys', {
        method: 'POST',
        json: { name: `child-${limitReset}`, limitUsdc: '0.2', ...(limitReset ? { limitReset } : {}) },
      })
      expect(response.status).toBe(201)
      expect(((await response.json()) as KeyView).limitReset).toBe((limitReset ?? null) as LimitReset | null)
    }
    expect(await listed(buyer, agent.id)).toMatchObject({ limitUsdc: '0.600000', limitReset: 'weekly' })
    // A lifetime-limited key may mint no periodic key: it would spend again every period.
    const lifetime = await mint(buyer, { name: 'lifetime', limitUsdc: '1' })
    await expectBinding(
      await call(lifetime.apiKey, '/v1/agent/keys', {
        method: 'POST',
        json: { name: 'x', limitUsdc: '0.1', limitReset: 'monthly' },
      }),
    )
  })

  test('a weekly key mints no monthly key: a month may start mid-week, where the key would spend its limit twice', async () => {
    const buyer = await fundedBuyer(stack)
    const agent = await mint(buyer, { name: 'agent', limitUsdc: '1', limitReset: 'weekly' })
    await waitForLastUsed(stack, agent.apiKey)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    // The week of Wednesday 2029-01-31: a monthly child of $1 spends $1 on the 31st and $1 more on
    // February 1st, $2 in one week of an agent held to $1 a week.
    await expectBinding(
      await call(agent.apiKey, '/v1/agent/keys', {
        method: 'POST',
        json: { name: 'monthly', limitUsdc: '1', limitReset: 'monthly' },
      }),
    )
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
    // A daily key's days each lie within one week and one month: it mints either.
    const daily = await mint(buyer, { name: 'daily', limitUsdc: '1', limitReset: 'daily' })
    for (const limitReset of ['weekly', 'monthly']) {
      const child = await mintKey(stack, daily.apiKey, { name: limitReset, limitUsdc: '0.2', limitReset })
      expect(child.limitReset).toBe(limitReset as LimitReset)
    }
    expect(await listed(buyer, daily.id)).toMatchObject({ limitUsdc: '0.600000', limitReset: 'daily' })
  })
})
