// A video job whose admission and record a Redis failover lost, on one slot (both on the one
// master): the gateway's journal writes the record again when its connection to Redis closes, and
// the job's clear at retrieve carries its admission, so the buyer gets the MP4 and is charged what
// the job cost, once. A redis-server of the test's own: the loss is made by putting every key back
// as it was before the job (test/helpers/saved-keys.ts), the closed connection by CLIENT KILL.
import { afterAll, expect, test } from 'bun:test'
import { startLocalRedis } from '../../src/redis/local-server.ts'
import { createStore } from '../../src/redis/store.ts'
import { keyFetch } from '../helpers/accounts.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { metricValue } from '../helpers/metrics.ts'
import { saveKeys } from '../helpers/saved-keys.ts'
import { startStack } from '../helpers/stack.ts'
import { retrieveWhenDone } from '../helpers/video.ts'
import { until } from '../helpers/wait.ts'

const redis = await startLocalRedis()
const store = createStore(redis.url, { name: 'svc-test-video-lost' })
const stack = await startStack({ sim: { videoJobMs: 100 }, env: { REDIS_URL: redis.url } })
afterAll(async () => {
  await stack.stop()
  store.close()
  await redis.stop()
})

const job = { model: 'svc/wan-2.1-video', prompt: 'waves on a harbour', duration: '5s' }

function replayedJobs(): Promise<number> {
  return metricValue(stack, 'svc_replayed_video_jobs_total{found="restored"}')
}

test('a video job lost with its admission is written again when the connection closes, and charged once at retrieve', async () => {
  await simOffer(stack, 40)
  const buyer = await fundedBuyer(stack, '3.000000')
  const post = (path: string, json: unknown) => keyFetch(stack, buyer.apiKey, path, { method: 'POST', json })
  const restoredBefore = await replayedJobs()
  const before = await saveKeys(store, stack.keys.prefix)
  const queued = await post('/v1/video/queue', job)
  expect(queued.status).toBe(200)
  const { id } = (await queued.json()) as { id: string }
  const held = Number(await store.hget(stack.keys.account(buyer.accountId), 'held'))
  expect(held).toBeGreaterThan(0)

  // The promoted replica never got the job: its admission, its hold and its record are gone.
  await before.restore()
  expect((await post('/v1/video/retrieve', { id })).status).toBe(404)
  // The failover closes the gateway's connections; its journal writes the record again.
  await store.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
  await until(async () => (await fetch(`${stack.url}/readyz`)).status === 200)
  await stack.gateway.replaysSettled()
  expect(await replayedJobs()).toBe(restoredBefore + 1)

  const media = await retrieveWhenDone(post, id)
  expect(media.status).toBe(200)
  expect(media.headers.get('content-type')).toStartWith('video/')
  await media.arrayBuffer()
  // Charged the job's price (its hold: the job's burn at the ask) once, late, from what admit answered.
  const account = await store.hgetall(stack.keys.account(buyer.accountId))
  expect(Number(account.spent)).toBe(held)
  expect(Number(account.held)).toBe(0)
  const record = await store.hgetall(stack.keys.videoJob(id))
  const attempt = await attemptRecord(store, stack.keys.attempt(record.attemptId!))
  expect(attempt).toMatchObject({ state: 'cleared', costUsdc: String(held), lateClear: 'lost' })
  // Retrieved again: the MP4, charged nothing more.
  const again = await post('/v1/video/retrieve', { id })
  expect(again.status).toBe(200)
  await again.arrayBuffer()
  expect(Number(await store.hget(stack.keys.account(buyer.accountId), 'spent'))).toBe(held)
}, 60_000)
