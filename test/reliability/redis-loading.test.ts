// Redis loading its data set (a restart, with persistence): every command is refused with LOADING
// until it is in. That is the store being unavailable: paid requests answer 503 store_unavailable
// (never a 500), /readyz says not ready, and once loaded the same buyer is served again.
import { afterAll, expect, test } from 'bun:test'
import { startLocalRedis } from '../../src/redis/local-server.ts'
import { keyFetch } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { type LoadingRedis, pad, restartLoading } from '../helpers/loading-redis.ts'
import { startStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

// A hang guard: a request held until Redis came back runs past it; a merely loaded machine does not.
const HANG_MS = 30_000

const redis = await startLocalRedis()
const stack = await startStack({ env: { REDIS_URL: redis.url } })
let loading: LoadingRedis | null = null
afterAll(async () => {
  await stack.gateway.stop()
  await stack.sim.stop()
  await loading?.stop()
  await redis.stop()
})

test('Redis loading its data set: 503 store_unavailable, /readyz 503; loaded: served again', async () => {
  await simOffer(stack, 40)
  const buyer = await fundedBuyer(stack)
  const chat = (stream: boolean) =>
    keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', stream, messages: [{ role: 'user', content: 'hi' }] },
      signal: AbortSignal.timeout(HANG_MS),
    })
  expect((await chat(false)).status).toBe(200)
  await pad(redis.url, 5_000)

  loading = await restartLoading(redis)
  for (const stream of [false, true, false, true]) {
    const refused = await chat(stream)
    expect(refused.status).toBe(503)
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('store_unavailable')
  }
  expect((await fetch(`${stack.url}/readyz`)).status).toBe(503)

  await loading.finish()
  await until(async () => (await fetch(`${stack.url}/readyz`)).status === 200, 50)
  const served = await chat(false)
  expect(served.status).toBe(200)
}, 60_000)

test('just after the load, a replica that serves a paid request also serves the account read', async () => {
  const buyer = await fundedBuyer(stack)
  const chat = () =>
    keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }] },
      signal: AbortSignal.timeout(5_000),
    })
  // The server now running is the one the first test restarted: that one is saved and killed.
  const running = loading
  loading = await restartLoading({ ...redis, kill: () => running?.stop() ?? redis.kill() })
  await loading.finish()
  // The first paid request served after the load: the account read right behind it must not
  // find the store away (both ride the same readiness, whichever connection carries them).
  await until(async () => (await chat()).status === 200, 50)
  const me = await keyFetch(stack, buyer.apiKey, '/v1/agent/me', { signal: AbortSignal.timeout(5_000) })
  expect(me.status).toBe(200)
}, 60_000)
