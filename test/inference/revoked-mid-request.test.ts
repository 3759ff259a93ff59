// A key revoked while its request falls forward, during a rolling deploy: while a replica of an
// earlier build (whose revoke leaves no mark) is seen, every attempt of a request names the key by
// its digest, so the next offer is not reached with a key revoked since the first.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Server } from 'bun'
import { digestApiKey } from '../../src/accounts/api-keys.ts'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let buyer: TestAccount
let revoking: Server<undefined>
let supplierCalls = 0

beforeAll(async () => {
  // The cheaper offer's supplier: while it has the request, the buyer's key is revoked as an
  // earlier build revokes it (its record and its entry on the account gone, no mark), then it fails
  // before any byte, so the request falls forward.
  revoking = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: async () => {
      supplierCalls++
      const digest = digestApiKey(buyer.apiKey)
      const keyId = (await stack.store.hget(stack.keys.apiKey(digest), 'id'))!
      await stack.store.del(stack.keys.apiKey(digest))
      await stack.store.hdel(stack.keys.accountKeys(buyer.accountId), keyId)
      return new Response('{"error":{"message":"unavailable"}}', { status: 503 })
    },
  })
  stack = await startStack({ env: { SVC_OFFER_COOLDOWN_MS: '0' } })
  const offer = await adminFetch(stack, '/admin/v1/offers', {
    method: 'POST',
    json: {
      upstreamBaseUrl: revoking.url.href.replace(/\/$/, ''),
      upstreamApiKey: 'k',
      askCents: 33,
      capacityDiem: '50',
    },
  })
  expect(offer.status).toBe(201)
  await simOffer(stack, 48) // the next offer, which the revoked key must not reach
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  await stack.stop()
  revoking.stop(true)
})

/** The time of the last reaper pass of any replica, ms (0 before the first). */
const lastPass = async () => Number((await stack.store.hget(stack.keys.reaperLastRun, 'at')) ?? 0)

test('while an earlier build is seen, a key revoked between two attempts is refused at the second', async () => {
  await stack.store.zadd(stack.keys.replicas, Date.now(), 'earlier-build:1:abc')
  // Two passes since: the check that follows a pass's stamp has run at least once.
  const since = await lastPass()
  await until(async () => (await lastPass()) > since)
  const next = await lastPass()
  await until(async () => (await lastPass()) > next)

  const before = await balances(stack, buyer.accountId)
  const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hello' }], max_tokens: 8 },
  })
  expect(supplierCalls).toBe(1)
  expect(response.status).not.toBe(200)
  await response.text()
  const after = await balances(stack, buyer.accountId)
  expect(after.confirmed).toBe(before.confirmed)
  expect(after.held).toBe(0)
})
