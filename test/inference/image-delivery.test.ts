// Images a supplier says it delivered are paid for only when they are images: an entry of `data`
// with no b64_json (an empty object, a URL the gateway never asked for, maybe to a private
// address) is neither counted nor relayed, and an answer with no image at all falls forward like
// any answer that delivered nothing.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Server } from 'bun'
import { auditAll } from '../../src/cli/audit.ts'
import { TINY_PNG_BASE64 } from '../../src/sim/images.ts'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

// flux-dev lists 0.01 DIEM per image
const PER_IMAGE = 10_000
const LIAR_ASK = 33
const HONEST_ASK = 48

let stack: TestStack
let liar: Server<undefined>
let buyer: TestAccount
let liarAnswer: () => unknown = () => ({})

beforeAll(async () => {
  liar = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch: () => Response.json(liarAnswer()),
  })
  stack = await startStack({ env: { SVC_OFFER_COOLDOWN_MS: '0' } })
  const offer = await adminFetch(stack, '/admin/v1/offers', {
    method: 'POST',
    json: {
      upstreamBaseUrl: `http://127.0.0.1:${liar.port}`,
      upstreamApiKey: 'liar',
      askCents: LIAR_ASK,
      capacityDiem: '50',
    },
  })
  expect(offer.status).toBe(201)
  await simOffer(stack, HONEST_ASK)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  await stack.stop()
  liar.stop(true)
})

const generate = (n: number) =>
  keyFetch(stack, buyer.apiKey, '/v1/images/generations', {
    method: 'POST',
    json: { model: 'flux-dev', prompt: 'a lighthouse', n },
  })

describe('images a supplier did not deliver are not paid for', () => {
  test('entries with no b64_json are not images: not counted, not relayed', async () => {
    liarAnswer = () => ({
      created: 1,
      data: [{ b64_json: TINY_PNG_BASE64 }, { url: 'http://169.254.169.254/latest/meta-data/' }, {}, 'x'],
    })
    const before = await balances(stack, buyer.accountId)
    const response = await generate(4)
    expect(response.status).toBe(200)
    const body = (await response.json()) as { data: unknown[] }
    expect(body.data).toEqual([{ b64_json: TINY_PNG_BASE64 }])
    const cost = Math.ceil((PER_IMAGE * LIAR_ASK) / 100)
    expect(response.headers.get('x-svc-cost-usdc')).toBe((cost / 1e6).toFixed(6))
    const after = await balances(stack, buyer.accountId)
    expect(before.confirmed - after.confirmed).toBe(cost)
    expect(after.held).toBe(0)
  })

  test('an answer with no image in it falls forward to the next offer, nothing paid to the first', async () => {
    for (const data of [[], [{}, {}], [{ b64_json: '' }, { b64_json: 7 }]]) {
      liarAnswer = () => ({ created: 1, data })
      const before = await balances(stack, buyer.accountId)
      const response = await generate(2)
      expect(response.status).toBe(200)
      expect(response.headers.get('x-svc-clearing-price-cents')).toBe(String(HONEST_ASK))
      const body = (await response.json()) as { data: { b64_json: string }[] }
      expect(body.data).toHaveLength(2)
      const after = await balances(stack, buyer.accountId)
      expect(before.confirmed - after.confirmed).toBe(Math.ceil((2 * PER_IMAGE * HONEST_ASK) / 100))
      expect(after.held).toBe(0)
    }
  })

  test('the audit finds nothing off', async () => {
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})
