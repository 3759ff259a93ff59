// Hostile input on the supplier routes: random JSON bodies, random sign-in messages and
// signatures, random queries. Never a 500 or a stack trace, always the error shape, and a refusal
// changes nothing in Redis.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import fc from 'fast-check'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { adminFetch, createAccount, keyFetch, waitForLastUsed } from '../helpers/accounts.ts'
import { expectShapedRefusal } from '../helpers/refusals.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { postSignIn, signInSupplier, siweMessage, type TestSupplier } from '../helpers/suppliers.ts'

let stack: TestStack
let supplier: TestSupplier
let offerId: string

beforeAll(async () => {
  stack = await startStack({ env: { SVC_SIWE_NONCES_PER_MINUTE: '100000' } })
  supplier = await signInSupplier(stack)
  const posted = await keyFetch(stack, supplier.apiKey, '/v1/supplier/offers', {
    method: 'POST',
    json: { upstreamApiKey: `venice-${randomUUID()}`, askCents: 40, capacityDiem: '10' },
  })
  offerId = ((await posted.json()) as { id: string }).id
})
afterAll(() => stack.stop())

const snapshot = () => snapshotKeys(stack.store, stack.keys.prefix)

describe('fuzzing the supplier routes', () => {
  test('random JSON on sign-in, offers and keys: shaped 4xx that change nothing', async () => {
    const calls: [string, string, boolean][] = [
      ['POST', '/v1/supplier/signin', false],
      ['POST', '/v1/supplier/offers', true],
      ['PATCH', `/v1/supplier/offers/${offerId}`, true],
      ['POST', '/v1/supplier/keys', true],
    ]
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...calls),
        fc.jsonValue({ maxDepth: 4 }),
        async ([method, path, keyed], body) => {
          const before = await snapshot()
          const response = await keyFetch(stack, keyed ? supplier.apiKey : null, path, { method, json: body })
          if (response.ok) return // a body that happens to be valid (a key name, an ask) may change things
          await expectShapedRefusal(response)
          expect(await snapshot()).toEqual(before)
        },
      ),
      { numRuns: 120 },
    )
  })

  test('random and mangled sign-in messages and signatures: shaped 4xx, no supplier made', async () => {
    const account = privateKeyToAccount(generatePrivateKey())
    const good = siweMessage(stack, account, 'abcdefgh12345678')
    const signature = await account.signMessage({ message: good })
    const mangled = fc
      .tuple(fc.nat(good.length), fc.nat(40), fc.string({ maxLength: 40 }))
      .map(([at, cut, text]) => good.slice(0, at) + text + good.slice(at + cut))
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.string({ maxLength: 600 }), mangled),
        fc.oneof(
          fc.constant(signature),
          fc.string({ maxLength: 200 }),
          fc.uint8Array({ maxLength: 150 }).map((b) => `0x${Buffer.from(b).toString('hex')}`),
        ),
        async (message, sig) => {
          const before = await snapshot()
          const response = await postSignIn(stack, { message, signature: sig })
          await expectShapedRefusal(response)
          expect(await snapshot()).toEqual(before)
        },
      ),
      { numRuns: 150 },
    )
  })

  test('random fills queries and offer ids: never a 500', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 60 }), fc.string({ maxLength: 60 }), async (query, id) => {
        const fills = await keyFetch(stack, supplier.apiKey, `/v1/supplier/fills?${encodeURI(query)}`)
        expect(fills.status).toBeLessThan(500)
        await fills.arrayBuffer()
        const offer = await keyFetch(stack, supplier.apiKey, `/v1/supplier/offers/${encodeURIComponent(id)}`)
        expect(offer.status).toBeLessThan(500)
        await offer.arrayBuffer()
      }),
      { numRuns: 100 },
    )
  })
})

describe('route ids that name other Redis keys', () => {
  test('a payout id naming the sender lock, a supplier id naming its offer set: 404s that change nothing', async () => {
    const wallet = '0x000000000000000000000000000000000000dead'
    await stack.store.set(stack.keys.payoutSenderLock(wallet), 'token')
    const before = await snapshot()
    const payout = await keyFetch(stack, supplier.apiKey, `/v1/supplier/payouts/sender:${wallet}`)
    expect(payout.status).toBe(404)
    await expectShapedRefusal(payout)
    for (const path of [
      `/admin/v1/suppliers/${supplier.supplierId}:offers`,
      `/admin/v1/suppliers/${supplier.supplierId}:keys`,
      `/admin/v1/offers/${offerId}:nope`,
    ]) {
      const response = await adminFetch(stack, path)
      expect([path, response.status]).toEqual([path, 404])
      await expectShapedRefusal(response)
    }
    const suspend = await adminFetch(stack, `/admin/v1/suppliers/${supplier.supplierId}:offers`, {
      method: 'PATCH',
      json: { status: 'suspended' },
    })
    expect(suspend.status).toBe(404)
    expect(await snapshot()).toEqual(before)
  })
  test('every route id that could name another key, on every route that takes one: a shaped 4xx that changes nothing', async () => {
    const buyer = await createAccount(stack)
    const wallet = '0x000000000000000000000000000000000000dead'
    const ids = [
      `sender:${wallet}`,
      `${buyer.accountId}:keys`,
      `${supplier.supplierId}:offers`,
      `${offerId}:x`,
      '*',
      'a b',
    ]
    const admin = (method: string, path: string, json?: unknown) => adminFetch(stack, path, { method, json })
    const asBuyer = (method: string, path: string, json?: unknown) =>
      keyFetch(stack, buyer.apiKey, path, { method, json })
    const asSupplier = (method: string, path: string, json?: unknown) =>
      keyFetch(stack, supplier.apiKey, path, { method, json })
    const calls = (id: string): [string, Promise<Response>][] => {
      const each: [string, () => Promise<Response>][] = [
        ['GET account', () => admin('GET', `/admin/v1/accounts/${id}`)],
        ['credit', () => admin('POST', `/admin/v1/accounts/${id}/credit`, { amountUsdc: '1', note: 'x' })],
        ['GET supplier', () => admin('GET', `/admin/v1/suppliers/${id}`)],
        ['GET offer', () => admin('GET', `/admin/v1/offers/${id}`)],
        ['PATCH offer', () => admin('PATCH', `/admin/v1/offers/${id}`, { status: 'paused' })],
        ['DELETE offer', () => admin('DELETE', `/admin/v1/offers/${id}`)],
        ['PATCH key', () => asBuyer('PATCH', `/v1/agent/keys/${id}`, { name: 'x' })],
        ['DELETE key', () => asBuyer('DELETE', `/v1/agent/keys/${id}`)],
        ['GET request', () => asBuyer('GET', `/v1/agent/requests/${id}`)],
        ['DELETE webhook', () => asBuyer('DELETE', `/v1/agent/webhooks/${id}`)],
        ['deliveries', () => asBuyer('GET', `/v1/agent/webhooks/${id}/deliveries`)],
        ['replay', () => asBuyer('POST', `/v1/agent/webhooks/${id}/deliveries/${id}/replay`)],
        ['supplier webhook', () => asSupplier('DELETE', `/v1/supplier/webhooks/${id}`)],
        ['GET own offer', () => asSupplier('GET', `/v1/supplier/offers/${id}`)],
        ['PATCH own offer', () => asSupplier('PATCH', `/v1/supplier/offers/${id}`, { askCents: 41 })],
        ['DELETE own offer', () => asSupplier('DELETE', `/v1/supplier/offers/${id}`)],
        ['DELETE supplier key', () => asSupplier('DELETE', `/v1/supplier/keys/${id}`)],
        ['GET payout', () => asSupplier('GET', `/v1/supplier/payouts/${id}`)],
        ['x402 payment', () => fetch(`${stack.url}/v1/x402/payments/${encodeURIComponent(id)}`)],
      ]
      return each.map(([name, send]) => [name, send()])
    }
    await stack.store.set(stack.keys.payoutSenderLock(wallet), 'token')
    await waitForLastUsed(stack, buyer.apiKey)
    const before = await snapshot()
    for (const id of ids) {
      for (const [name, sent] of calls(encodeURIComponent(id))) {
        const response = await sent
        expect([name, id, response.status >= 400 && response.status < 500]).toEqual([name, id, true])
        await expectShapedRefusal(response)
      }
    }
    expect(await snapshot()).toEqual(before)
  })
})
