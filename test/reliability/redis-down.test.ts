// Redis unreachable: requests fail fast with 503 in the error shape, /readyz turns false, nothing
// hangs; when Redis is back, the gateway reconnects by itself and serves again.
import { afterAll, expect, test } from 'bun:test'
import { startLocalRedis } from '../../src/redis/local-server.ts'
import { keyFetch } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

// A hang guard: a request held until Redis came back runs past it; a merely loaded machine does not.
const HANG_MS = 30_000

let redis = await startLocalRedis()
const port = redis.port
const stack = await startStack({ env: { REDIS_URL: redis.url } })
afterAll(async () => {
  await stack.gateway.stop()
  await stack.sim.stop()
  await redis.stop()
})

test('Redis down: 503 store_unavailable at once, /readyz false; back up: served again', async () => {
  // This stack runs on its own redis-server, so stopping it disturbs no other test.
  await simOffer(stack, 40)
  const buyer = await fundedBuyer(stack)
  const chat = () =>
    keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }] },
      signal: AbortSignal.timeout(HANG_MS),
    })
  expect((await fetch(`${stack.url}/readyz`)).status).toBe(200)

  await redis.stop()
  // Once the gateway has seen its Redis go (its ping fails), however long that takes here.
  const readyz = () => fetch(`${stack.url}/readyz`, { signal: AbortSignal.timeout(HANG_MS) })
  await until(async () => (await readyz()).status === 503, 20)
  const down = await chat()
  expect(down.status).toBe(503)
  expect(down.headers.get('retry-after')).toBe('1')
  expect(((await down.json()) as { error: { code: string } }).error.code).toBe('store_unavailable')
  expect((await readyz()).status).toBe(503)
  const models = await fetch(`${stack.url}/v1/models`, { signal: AbortSignal.timeout(HANG_MS) })
  expect([200, 503]).toContain(models.status) // answered at once (from the catalog cache, or 503), not hung

  redis = await startLocalRedis([], port)
  // Ready again once the gateway's connection has come back, however long its retries take here.
  await until(async () => (await fetch(`${stack.url}/readyz`)).status === 200, 50)
  expect((await fetch(`${stack.url}/readyz`)).status).toBe(200)
  // The new server is empty (no persistence here): post supply and a buyer again, and a paid
  // request goes through on the gateway's own reconnected connection.
  await simOffer(stack, 40)
  const again = await fundedBuyer(stack)
  const served = await keyFetch(stack, again.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }] },
  })
  expect(served.status).toBe(200)
}, 30_000)
