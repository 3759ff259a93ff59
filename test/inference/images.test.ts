// POST /v1/images/generations: the openai SDK's images.generate against the gateway, billed per
// image delivered at the clearing price, one image job in flight per wallet.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { auditAll } from '../../src/cli/audit.ts'
import { formatMicros } from '../../src/money/units.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, type SimOffer, simKey, simOffer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let buyer: TestAccount
let client: OpenAI
let cheap: SimOffer

beforeAll(async () => {
  stack = await startStack({ env: { SVC_OFFER_COOLDOWN_MS: '0' } })
  cheap = await simOffer(stack, 40)
  await simOffer(stack, 50)
  buyer = await fundedBuyer(stack, '2.000000')
  client = new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
})
afterAll(() => stack.stop())

// flux-dev lists 0.01 DIEM per image: 10,000 micro-DIEM
const PER_IMAGE = 10_000

describe('images', () => {
  test('images.generate: n PNGs, cost = per-image price x n x ask, the exact balance change', async () => {
    const before = await balances(stack, buyer.accountId)
    const { data, response } = await client.images
      .generate({ model: 'svc/flux-dev', prompt: 'a lighthouse at dusk', n: 2 })
      .withResponse()
    expect(data.data).toHaveLength(2)
    const png = Buffer.from(data.data![0]!.b64_json!, 'base64')
    expect(png.subarray(1, 4).toString()).toBe('PNG')
    const cost = Math.ceil((2 * PER_IMAGE * 40) / 100)
    expect(response.headers.get('x-svc-cost-usdc')).toBe(formatMicros(cost))
    expect(response.headers.get('x-svc-clearing-price-cents')).toBe('40')
    expect(response.headers.get('x-svc-support-reference')).toMatch(/^sr_/)
    expect(response.headers.get('x-svc-request-id')).toMatch(/^req_[0-9a-f]{24}$/)
    const after = await balances(stack, buyer.accountId)
    expect(before.confirmed - after.confirmed).toBe(cost)
    expect(response.headers.get('x-balance-remaining')).toBe(formatMicros(after.confirmed))
  })

  test('a supplier failing before any byte falls forward; only the one that served is paid', async () => {
    await simKey(stack, cheap.upstreamKey, { fault: 'error_5xx', times: 1 })
    const before = await balances(stack, buyer.accountId)
    const { response } = await client.images.generate({ model: 'flux-dev', prompt: 'x' }).withResponse()
    expect(response.headers.get('x-svc-clearing-price-cents')).toBe('50')
    expect(before.confirmed - (await balances(stack, buyer.accountId)).confirmed).toBe(PER_IMAGE / 2)
  })

  test('one image job in flight per wallet, always: a second one is 429 buyer_concurrency_limit', async () => {
    await simKey(stack, cheap.upstreamKey, { fault: 'slow_first_byte', times: 1 })
    const first = keyFetch(stack, buyer.apiKey, '/v1/images/generations', {
      method: 'POST',
      json: { model: 'flux-dev', prompt: 'slow one' },
    })
    // The first job admitted (its hold in place) before the second asks.
    await until(async () => (await balances(stack, buyer.accountId)).held > 0)
    const second = await keyFetch(stack, buyer.apiKey, '/v1/images/generations', {
      method: 'POST',
      json: { model: 'flux-dev', prompt: 'second' },
    })
    expect(second.status).toBe(429)
    expect(second.headers.get('retry-after')).toBe('1')
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe('buyer_concurrency_limit')
    // text requests of the same wallet are not held back by the image cap group
    const chat = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }] },
    })
    expect(chat.status).toBe(200)
    expect((await first).status).toBe(200)
  })

  for (const [why, body, status, code] of [
    ['a text model', { model: 'llama-3.3-70b', prompt: 'x' }, 400, 'model_not_image'],
    ['an unknown model', { model: 'nope', prompt: 'x' }, 404, 'model_not_found'],
    ['no prompt', { model: 'flux-dev' }, 400, 'invalid_request'],
    ['n above 4', { model: 'flux-dev', prompt: 'x', n: 5 }, 400, 'invalid_request'],
    [
      'a url response format',
      { model: 'flux-dev', prompt: 'x', response_format: 'url' },
      400,
      'unsupported_response_format',
    ],
    ['a streamed request', { model: 'flux-dev', prompt: 'x', stream: true }, 400, 'unsupported_parameter'],
  ] as [string, Record<string, unknown>, number, string][]) {
    test(`${why}: ${status} ${code}, nothing changes in Redis`, async () => {
      const snapshot = async () =>
        Object.fromEntries(
          Object.entries(await snapshotKeys(stack.store, stack.keys.prefix)).filter(
            ([k]) => !k.includes(':apikey:'),
          ),
        )
      const before = await snapshot()
      const response = await keyFetch(stack, buyer.apiKey, '/v1/images/generations', {
        method: 'POST',
        json: body,
      })
      expect(response.status).toBe(status)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe(code)
      expect(await snapshot()).toEqual(before)
    })
  }

  test('a refused response_format or stream names what is supported', async () => {
    for (const extra of [{ response_format: 'url' }, { stream: true }]) {
      const response = await keyFetch(stack, buyer.apiKey, '/v1/images/generations', {
        method: 'POST',
        json: { model: 'flux-dev', prompt: 'x', ...extra },
      })
      const { error } = (await response.json()) as { error: { message: string } }
      expect(error.message).toContain(Object.keys(extra)[0]!)
      expect(error.message).toContain('b64_json')
    }
  })

  test('the audit finds nothing off', async () => {
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})
