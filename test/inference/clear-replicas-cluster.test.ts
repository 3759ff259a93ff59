// SVC_CLEAR_REPLICAS on a three-master Cluster with a replica each, the market held apart: a clear
// waits on the replicas of the masters it wrote on (its account's and its offer's), so while one
// master's replica sleeps, a buyer whose clears write elsewhere is told at once, replicated, and
// only a buyer whose account lies on that master waits out the wait. The clear journal keeps each
// write by its master too, a video job's record as well.
import { afterAll, expect, test } from 'bun:test'
import { createLogger } from '../../src/logger.ts'
import { ownerKeyspaces } from '../../src/market/two-phase.ts'
import { parseMicros } from '../../src/money/units.ts'
import { startLocalCluster } from '../../src/redis/local-cluster.ts'
import { createStore } from '../../src/redis/store.ts'
import { adminFetch, keyFetch, logCapture, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { metricValue } from '../helpers/metrics.ts'
import { putToSleep } from '../helpers/replicated-redis.ts'
import { startStack } from '../helpers/stack.ts'

const cluster = await startLocalCluster(3, ['--enable-debug-command', 'yes'], { replicas: true })
const store = createStore(cluster.url, { name: 'svc-test-clear-replicas-cluster' })
const stack = await startStack({
  env: { REDIS_URL: cluster.url, SVC_CLEAR_REPLICAS: '1', SVC_CLEAR_REPLICAS_WAIT_MS: '300' },
  tune: (config) => {
    config.redisLayout = 'apart'
  },
  logger: createLogger('warn', 'svc-test', logCapture().stream),
})
afterAll(async () => {
  await stack.stop()
  store.close()
  cluster.stop()
})

async function paidChat(buyer: TestAccount): Promise<void> {
  const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 },
  })
  expect(response.status).toBe(200)
  await response.arrayBuffer()
  expect(parseMicros(response.headers.get('x-svc-cost-usdc')!)).toBeGreaterThan(0)
}

const waitsCounted = (outcome: string) =>
  metricValue(stack, `svc_clear_replica_waits_total{outcome="${outcome}"}`)

test("one master's replica asleep holds back only the clears written on that master", async () => {
  await store.whenReady(15_000)
  const owners = ownerKeyspaces(stack.keys.prefix)
  const offer = await simOffer(stack, 40)
  const offerMaster = store.masterOf(owners.offer(offer.id).base)!
  const masterOf = (buyer: TestAccount) => store.masterOf(owners.account(buyer.accountId).base)!
  // A buyer on a master the offer is not on (its replica will sleep), and one on another master.
  let onSleeper: TestAccount | undefined
  let elsewhere: TestAccount | undefined
  while (!onSleeper || !elsewhere) {
    const buyer = await fundedBuyer(stack)
    const master = masterOf(buyer)
    if (!onSleeper && master !== offerMaster) onSleeper = buyer
    else if (onSleeper && master !== masterOf(onSleeper)) elsewhere = buyer
  }
  const sleeper = masterOf(onSleeper)
  // Both told replicated while every replica answers.
  const replicated = await waitsCounted('replicated')
  await paidChat(onSleeper)
  await paidChat(elsewhere)
  expect(await waitsCounted('replicated')).toBe(replicated + 2)

  const index = cluster.nodes.findIndex((n) => `127.0.0.1:${n.port}` === sleeper)
  // Asleep well past the two chats below (the cluster's stop ends the sleep).
  await putToSleep(`redis://127.0.0.1:${cluster.replicas[index]!.port}`, 10)
  const [replicatedBefore, timedOutBefore] = [
    await waitsCounted('replicated'),
    await waitsCounted('timed_out'),
  ]
  await paidChat(elsewhere)
  expect(await waitsCounted('replicated')).toBe(replicatedBefore + 1)
  expect(await waitsCounted('timed_out')).toBe(timedOutBefore)
  await paidChat(onSleeper)
  expect(await waitsCounted('timed_out')).toBe(timedOutBefore + 1)
}, 60_000)

test("a video job's record is kept by the master that holds it, as a clear is", async () => {
  const buyer = await fundedBuyer(stack)
  const queued = await keyFetch(stack, buyer.apiKey, '/v1/video/queue', {
    method: 'POST',
    json: { model: 'wan-2.1-video', prompt: 'waves', duration: '5s' },
  })
  expect(queued.status).toBe(200)
  const { id } = (await queued.json()) as { id: string }
  const response = await adminFetch(stack, '/metrics')
  const masters = [
    ...(await response.text()).matchAll(/^svc_journal_unreplicated_seconds\{master="([^"]*)"\}/gm),
  ]
  // Every write kept is named by its master: none kept as any master's.
  expect(masters.map((m) => m[1])).toContain(store.masterOf(stack.keys.videoJob(id)))
  expect(masters.map((m) => m[1])).not.toContain('')
})
