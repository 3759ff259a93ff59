// The store says when a connection to a Redis server it had ready closes (the clear journal's
// signal): once per loss, not once per failed reconnect, and again after the next one. A real
// redis-server of its own, stopped and started again on its port.
import { afterAll, expect, test } from 'bun:test'
import { type LocalRedis, startLocalRedis } from '../../src/redis/local-server.ts'
import { createStore } from '../../src/redis/store.ts'
import { until } from '../helpers/wait.ts'

let redis: LocalRedis = await startLocalRedis()
const port = redis.port
let losses = 0
let errors = 0
const store = createStore(redis.url, {
  failFast: true,
  onLost: () => {
    losses++
  },
  onError: () => {
    errors++
  },
})
afterAll(async () => {
  store.close()
  await redis.stop()
})

test('a server that goes away is one loss however many reconnects fail; back and gone again is another', async () => {
  await store.whenReady(15_000)
  expect(losses).toBe(0)
  await redis.stop()
  await until(() => losses === 1)
  // Reconnects fail meanwhile, each an error: none is a loss of its own.
  const errorsAtLoss = errors
  await until(() => errors >= errorsAtLoss + 3, 20)
  expect(losses).toBe(1)

  redis = await startLocalRedis([], port)
  await until(() => store.ready, 20)
  expect(await store.ping()).toBe('PONG')
  expect(losses).toBe(1)
  await redis.stop()
  await until(() => losses === 2)
})
