// SVC_CLEAR_REPLICAS: a clear's cost is told only once the master's replicas have the clear. A real
// master and replica of the test's own, a gateway on the master:
// - the replica's link cut while it sleeps (DEBUG SLEEP, CLIENT KILL TYPE replica) as a paid request
//   is answered, and the master killed -9 the moment the answer arrives: the replica has the charge
//   the buyer was told (without the wait, the answer comes while the replica is cut off, and the
//   charge dies with the master);
// - the replica cut off: the cost is told anyway once the wait runs out, counted timed_out and logged.
import { afterAll, expect, test } from 'bun:test'
import Redis from 'ioredis'
import { createLogger } from '../../src/logger.ts'
import { parseMicros } from '../../src/money/units.ts'
import { keyFetch, logCapture, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { metricValue } from '../helpers/metrics.ts'
import { putToSleep, startReplicatedRedis } from '../helpers/replicated-redis.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const { master, replica } = await startReplicatedRedis()
const onMaster = new Redis(master.url)
// The master is killed below.
onMaster.on('error', () => {})
const onReplica = new Redis(replica.url)
const stacks: TestStack[] = []
afterAll(async () => {
  for (const stack of stacks) await stack.stop()
  onMaster.disconnect()
  onReplica.disconnect()
  await Promise.all([master.stop(), replica.stop()])
})

const logs = logCapture()

async function stackOn(waitMs: number): Promise<{ stack: TestStack; buyer: TestAccount }> {
  const stack = await startStack({
    env: { REDIS_URL: master.url, SVC_CLEAR_REPLICAS: '1', SVC_CLEAR_REPLICAS_WAIT_MS: String(waitMs) },
    logger: createLogger('warn', 'svc-test', logs.stream),
  })
  stacks.push(stack)
  await simOffer(stack, 40)
  return { stack, buyer: await fundedBuyer(stack) }
}

async function paidChat(stack: TestStack, buyer: TestAccount): Promise<number> {
  const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 },
  })
  expect(response.status).toBe(200)
  await response.arrayBuffer()
  return parseMicros(response.headers.get('x-svc-cost-usdc')!)!
}

/** The replica is linked and has everything the master has. */
async function inSync(): Promise<void> {
  await until(async () => Number(await onMaster.call('WAIT', 1, 100)) === 1, 50)
}

function waitsCounted(stack: TestStack, outcome: string): Promise<number> {
  return metricValue(stack, `svc_clear_replica_waits_total{outcome="${outcome}"}`)
}

test('a replica cut off: the cost is told once the wait runs out, and counted timed out', async () => {
  const { stack, buyer } = await stackOn(200)
  await inSync()
  await onReplica.call('REPLICAOF', 'NO', 'ONE')
  const before = await waitsCounted(stack, 'timed_out')
  expect(await paidChat(stack, buyer)).toBeGreaterThan(0)
  expect(await waitsCounted(stack, 'timed_out')).toBe(before + 1)
  // An operator is told, in the log as well as the metric.
  expect(logs.lines.some((line) => line.includes('a replica is down or lagging'))).toBe(true)
  await onReplica.call('REPLICAOF', '127.0.0.1', String(master.port))
  await inSync()
})

test('a cost is told only once the replica has the clear: the master killed as the answer arrives, the replica charged it', async () => {
  const { stack, buyer } = await stackOn(10_000)
  const replicatedBefore = await waitsCounted(stack, 'replicated')
  const told = [await paidChat(stack, buyer)]
  expect(await waitsCounted(stack, 'replicated')).toBe(replicatedBefore + 1)
  await inSync()

  const { awake } = await putToSleep(replica.url, 1)
  // The link cut while the replica sleeps: nothing reaches it until it wakes and links again.
  await onMaster.call('CLIENT', 'KILL', 'TYPE', 'replica')
  told.push(await paidChat(stack, buyer))
  await master.kill()
  await awake

  const spent = await onReplica.hget(stack.keys.account(buyer.accountId), 'spent')
  expect(Number(spent)).toBe(told[0]! + told[1]!)
}, 30_000)
