// Buyer traffic through the real gateway clearing on a self-served offer: the supplier's fills and
// earnings (GET /v1/supplier/me, the sum of GET /v1/supplier/fills, and GET /v1/supplier/earnings per
// UTC day) equal, to the micro-USDC,
// what the buyers were told they were charged less the fee, under concurrency, and a fill never
// names the buyer.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import OpenAI from 'openai'
import { parseMicros } from '../../src/money/units.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'

const FEE_BPS = 250
let stack: TestStack
let supplier: TestSupplier
let buyers: TestAccount[]
let offerId: string
const charges: number[] = []

interface Fill {
  createdAt: string
  model: string
  offerId: string
  burnDiem: string
  clearingPriceCents: number
  earnedUsdc: string
}

const earnedOf = (charge: number) => charge - Math.floor((charge * FEE_BPS) / 10_000)
const micros = (text: string) => parseMicros(text)!

async function allFills(apiKey: string, limit = 7): Promise<Fill[]> {
  const fills: Fill[] = []
  let cursor: string | null = null
  for (;;) {
    const query: string = cursor === null ? `?limit=${limit}` : `?limit=${limit}&before=${cursor}`
    const page = (await (await keyFetch(stack, apiKey, `/v1/supplier/fills${query}`)).json()) as {
      object: string
      data: Fill[]
      nextCursor: string | null
    }
    expect(page.object).toBe('list')
    fills.push(...page.data)
    if (page.nextCursor === null) return fills
    cursor = page.nextCursor
  }
}

async function me(apiKey: string) {
  return (await (await keyFetch(stack, apiKey, '/v1/supplier/me')).json()) as Record<string, string>
}

beforeAll(async () => {
  stack = await startStack({ env: { SVC_FEE_BPS: String(FEE_BPS) }, sim: { outputTokens: 40 } })
  supplier = await signInSupplier(stack)
  const posted = await keyFetch(stack, supplier.apiKey, '/v1/supplier/offers', {
    method: 'POST',
    json: { upstreamApiKey: `venice-${randomUUID()}`, askCents: 43, capacityDiem: '100' },
  })
  expect(posted.status).toBe(201)
  offerId = ((await posted.json()) as { id: string }).id
  buyers = await Promise.all([fundedBuyer(stack, '20'), fundedBuyer(stack, '20')])
})
afterAll(() => stack.stop())

describe('a self-served offer earns what its buyers pay less the fee', () => {
  test('50 concurrent buffered requests from two buyers, then streams through the openai SDK', async () => {
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        keyFetch(stack, buyers[i % 2]!.apiKey, '/v1/chat/completions', {
          method: 'POST',
          json: {
            model: 'llama-3.3-70b',
            messages: [{ role: 'user', content: `request ${i} ${'word '.repeat(i)}` }],
            max_tokens: 64,
          },
        }),
      ),
    )
    for (const response of responses) {
      expect(response.status).toBe(200)
      expect(response.headers.get('x-svc-clearing-price-cents')).toBe('43')
      charges.push(micros(response.headers.get('x-svc-cost-usdc')!))
      await response.arrayBuffer()
    }
    const openai = new OpenAI({ apiKey: buyers[0]!.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
    for (let i = 0; i < 3; i++) {
      const stream = await openai.chat.completions.create({
        model: 'llama-3.3-70b',
        messages: [{ role: 'user', content: `stream ${i}` }],
        stream: true,
        stream_options: { include_usage: true },
      })
      let cost: string | undefined
      for await (const chunk of stream) {
        const frame = chunk as unknown as { object?: string; costUsdc?: string }
        if (frame.object === 'svc.cost') cost = frame.costUsdc
      }
      expect(cost).toBeDefined()
      charges.push(micros(cost!))
    }
    expect(charges.every((c) => c > 0)).toBe(true)

    const expectedEarned = charges.reduce((sum, c) => sum + earnedOf(c), 0)
    const summary = await me(supplier.apiKey)
    expect(micros(summary.earnedUsdc!)).toBe(expectedEarned)
    expect(summary.payableUsdc).toBe(summary.earnedUsdc)
    expect(summary.paidOutUsdc).toBe('0.000000')
    expect(summary.payoutPendingUsdc).toBe('0.000000')

    const fills = await allFills(supplier.apiKey)
    expect(fills).toHaveLength(53)
    expect(fills.reduce((sum, f) => sum + micros(f.earnedUsdc), 0)).toBe(expectedEarned)
    expect(fills.map((f) => micros(f.earnedUsdc)).sort((a, b) => a - b)).toEqual(
      charges.map(earnedOf).sort((a, b) => a - b),
    )
    for (const fill of fills) {
      expect(fill).toMatchObject({ offerId, model: 'llama-3.3-70b', clearingPriceCents: 43 })
      expect(Object.keys(fill).sort()).toEqual(
        ['burnDiem', 'clearingPriceCents', 'createdAt', 'earnedUsdc', 'model', 'offerId'].sort(),
      )
    }
    const times = fills.map((f) => Date.parse(f.createdAt))
    expect(times).toEqual([...times].sort((a, b) => b - a))

    // Buyers' spend equals the offer's earnings plus its fees, from Redis itself.
    const spent = (
      await Promise.all(buyers.map((b) => stack.store.hget(stack.keys.account(b.accountId), 'spent')))
    ).reduce((sum, v) => sum + Number(v), 0)
    const offer = await stack.store.hmget(stack.keys.offer(offerId), 'earned', 'fees')
    expect(spent).toBe(charges.reduce((a, b) => a + b, 0))
    expect(Number(offer[0]) + Number(offer[1])).toBe(spent)
  })

  test("a fill never carries a buyer's account, key or wallet", async () => {
    const raw = JSON.stringify(
      await stack.store.xrange(stack.keys.supplierFills(supplier.supplierId), '-', '+'),
    )
    const served = JSON.stringify(await allFills(supplier.apiKey, 200))
    const keyIds = await Promise.all(
      buyers.map(async (b) => Object.keys(await stack.store.hgetall(stack.keys.accountKeys(b.accountId)))),
    )
    for (const text of [raw, served]) {
      for (const buyer of buyers) {
        expect(text).not.toContain(buyer.accountId)
        expect(text.toLowerCase()).not.toContain(buyer.wallet.toLowerCase())
      }
      for (const id of keyIds.flat()) expect(text).not.toContain(id)
      expect(text).not.toContain('sr_')
    }
  })

  test('bad paging is a 400; a page ends with a null cursor', async () => {
    for (const query of ['?limit=0', '?limit=201', '?limit=x', '?before=nope']) {
      const response = await keyFetch(stack, supplier.apiKey, `/v1/supplier/fills${query}`)
      expect(response.status).toBe(400)
    }
    const page = (await (await keyFetch(stack, supplier.apiKey, '/v1/supplier/fills?limit=200')).json()) as {
      nextCursor: string | null
    }
    expect(page.nextCursor).toBeNull()
    const below = await keyFetch(stack, supplier.apiKey, '/v1/supplier/fills?before=0-0')
    expect(below.status).toBe(200)
    expect(await below.json()).toEqual({ object: 'list', data: [], nextCursor: null })
  })

  test('earnings per UTC day sum the fills exactly; a day is the fill time in UTC; the window bounds them', async () => {
    type Earnings = {
      object: string
      window: string
      earnedUsdc: string
      burnDiem: string
      fills: number
      days: { date: string; earnedUsdc: string; burnDiem: string; fills: number }[]
    }
    const earnings = async (query = '') =>
      (await (await keyFetch(stack, supplier.apiKey, `/v1/supplier/earnings${query}`)).json()) as Earnings
    const fills = await allFills(supplier.apiKey, 200)
    const week = await earnings()
    expect(week).toMatchObject({ object: 'earnings', window: '7d', fills: fills.length })
    expect(week.days).toHaveLength(7)
    expect(micros(week.earnedUsdc)).toBe(micros((await me(supplier.apiKey)).earnedUsdc!))
    const expected = new Map<string, { earned: number; burn: number; fills: number }>()
    for (const f of fills) {
      const day = f.createdAt.slice(0, 10)
      const row = expected.get(day) ?? { earned: 0, burn: 0, fills: 0 }
      row.earned += micros(f.earnedUsdc)
      row.burn += micros(f.burnDiem)
      row.fills += 1
      expected.set(day, row)
    }
    for (const day of week.days) {
      const want = expected.get(day.date) ?? { earned: 0, burn: 0, fills: 0 }
      expect([micros(day.earnedUsdc), micros(day.burnDiem), day.fills]).toEqual([
        want.earned,
        want.burn,
        want.fills,
      ])
    }
    // another supplier's fills from 40 and 3 days ago: the one 3 days ago counts on its day in 7d
    // and 30d, the one 40 days ago in neither
    const older = await signInSupplier(stack)
    const daysAgo = (n: number) => Date.now() - n * 86_400_000
    for (const n of [40, 3]) {
      await stack.store.xadd(
        stack.keys.supplierFills(older.supplierId),
        `${daysAgo(n)}-0`,
        ...[
          'offer',
          offerId,
          'model',
          'llama-3.3-70b',
          'burnDiem',
          '1000',
          'askCents',
          '43',
          'earnedUsdc',
          '420',
        ],
      )
    }
    const threeDaysAgo = new Date(daysAgo(3)).toISOString().slice(0, 10)
    for (const window of ['7d', '30d']) {
      const answer = (await (
        await keyFetch(stack, older.apiKey, `/v1/supplier/earnings?window=${window}`)
      ).json()) as Earnings
      expect(answer).toMatchObject({ fills: 1, earnedUsdc: '0.000420', burnDiem: '0.001000' })
      expect(answer.days.filter((d) => d.fills > 0)).toEqual([
        { date: threeDaysAgo, earnedUsdc: '0.000420', burnDiem: '0.001000', fills: 1 },
      ])
    }
    expect((await earnings('?window=24h')).days).toHaveLength(1)
    for (const query of ['?window=1y', '?window=', '?window=7D']) {
      const response = await keyFetch(stack, supplier.apiKey, `/v1/supplier/earnings${query}`)
      expect(response.status).toBe(400)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('invalid_window')
    }
  })

  test('another supplier sees no fills and no earnings', async () => {
    const other = await signInSupplier(stack)
    expect(await allFills(other.apiKey)).toEqual([])
    expect((await me(other.apiKey)).earnedUsdc).toBe('0.000000')
    const earnings = (await (
      await keyFetch(stack, other.apiKey, '/v1/supplier/earnings?window=30d')
    ).json()) as {
      earnedUsdc: string
      fills: number
    }
    expect(earnings).toMatchObject({ earnedUsdc: '0.000000', fills: 0 })
    const buyer = await keyFetch(stack, buyers[0]!.apiKey, '/v1/supplier/earnings')
    expect(buyer.status).toBe(401)
  })
})
