// The compiled binary (minified, so no class keeps its source name) tells a store that is away as
// the source does: with the connection lost while a command was in flight, with Redis loading its
// data set, and with Redis stopped, a `serve` process answers 503 store_unavailable, never 500
// internal_error, and /readyz 503. It reaches Redis through a proxy of the test's own, which can
// hold commands in flight.
import { afterAll, expect, test } from 'bun:test'
import { type Cluster, call, fundedBuyer, simOffer, startCluster } from '../../chaos/cluster.ts'
import { startLocalRedis } from '../../src/redis/local-server.ts'
import { startSim } from '../../src/sim/server.ts'
import { compiledBinary } from '../helpers/binary.ts'
import { type LoadingRedis, pad, restartLoading } from '../helpers/loading-redis.ts'
import { startRedisProxy } from '../helpers/redis-proxy.ts'
import { until } from '../helpers/wait.ts'

const binary = await compiledBinary()
const redis = await startLocalRedis()
const proxy = startRedisProxy({ host: '127.0.0.1', port: redis.port })
const sim = startSim({ port: 0 })
let cluster: Cluster | undefined
let loading: LoadingRedis | null = null
afterAll(async () => {
  await cluster?.stop()
  await sim.stop()
  await loading?.stop()
  proxy.stop()
  await redis.stop()
})

test('the compiled binary: a command lost in flight, Redis loading, Redis stopped -> 503 store_unavailable, never 500', async () => {
  cluster = await startCluster({ redisUrl: proxy.url, sim, replicas: 1, command: [binary, 'serve'] })
  const url = cluster.replicas[0]!.url
  await simOffer(cluster, sim, 40)
  const buyer = await fundedBuyer(cluster)
  const chat = (stream: boolean) =>
    call(url, '/v1/chat/completions', buyer.apiKey, {
      model: 'llama-3.3-70b',
      stream,
      messages: [{ role: 'user', content: 'hi' }],
    })
  const me = () => call(url, '/v1/agent/me', buyer.apiKey, undefined, 'GET')
  const expectStoreUnavailable = async (response: Response) => {
    const body = (await response.json()) as { error: { code: string } }
    expect([response.status, body.error.code]).toEqual([503, 'store_unavailable'])
  }
  const storeAway = async () => {
    for (const response of [await chat(false), await chat(true), await me()])
      await expectStoreUnavailable(response)
    expect((await fetch(`${url}/readyz`)).status).toBe(503)
  }
  const storeBack = async () => {
    await until(async () => (await fetch(`${url}/readyz`)).status === 200, 50)
    expect((await chat(false)).status).toBe(200)
  }
  expect((await chat(false)).status).toBe(200)

  // A command in flight when the connection drops: ioredis fails it as out of retries.
  proxy.hold()
  const inFlight = me()
  await proxy.held()
  proxy.down()
  await expectStoreUnavailable(await inFlight)
  proxy.up()
  await storeBack()

  await pad(redis.url, 5_000)
  loading = await restartLoading(redis)
  await storeAway()
  await loading.finish()
  await storeBack()

  await loading.stop()
  loading = null
  await storeAway()
}, 60_000)
