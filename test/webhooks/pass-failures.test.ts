// Overlapping webhook passes (src/webhooks/consumer.ts), against real Redis and receivers of the
// test's own on loopback:
// - an owner whose drain throws must not end its pass while the pass's other owners are still
//   being delivered: stop() waits for every delivery in flight, and the owner stays flagged;
// - a sweep run while the replica's OWNERS_AT_ONCE slots are held by another pass must not drop
//   the owners it could not visit: what a stopped replica left unflagged is still sent.
import { afterAll, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import pino from 'pino'
import type { WebhookConfig } from '../../src/config.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { createStore } from '../../src/redis/store.ts'
import { startWebhookConsumer, WebhookConsumer } from '../../src/webhooks/consumer.ts'
import { webhookParts } from '../../src/webhooks/endpoints.ts'
import { streamIdOf, triesField } from '../../src/webhooks/event-ids.ts'
import { type Owner, supplierOwner } from '../../src/webhooks/events.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { startReceiver } from '../webhooks/helpers.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-rv2-webhook-passes' })
afterAll(() => store.close())

function setup(config: WebhookConfig) {
  const keys = keyspace(testPrefix())
  const { webhooks, deliveries } = webhookParts(store, keys, randomBytes(32), config)
  const consumer = new WebhookConsumer(store, keys, webhooks, deliveries, config)
  const supplier = async (url: string): Promise<[string, Owner]> => {
    const id = `sup_${randomUUID()}`
    await store.hset(keys.supplier(id), 'id', id, 'status', 'active')
    await webhooks.create(supplierOwner(id), { url, events: ['supplier.suspended'] })
    return [id, supplierOwner(id)]
  }
  const suspend = (id: string) =>
    runScript(store, 'supplierStatus', [keys.base], { supplierId: id, status: 'suspended' })
  return { keys, consumer, supplier, suspend }
}

test("an owner whose drain throws ends neither its pass's other deliveries nor its flag", async () => {
  const config: WebhookConfig = {
    allowLoopback: true,
    timeoutMs: 1_500,
    backoffMs: 50,
    maxAttempts: 3,
    pollMs: 20,
  }
  const { keys, consumer, supplier, suspend } = setup(config)
  const receiver = startReceiver(['hang'])
  const [slowId, slow] = await supplier(receiver.url)
  // The first pass is a sweep: had here, so the loop's passes read the flagged owners together.
  await consumer.pass(true)
  // A broken owner: flagged, its stream not a stream (any command on it throws, as on a blip).
  const broken = supplierOwner(`sup_${randomUUID()}`)
  await store.set(keys.webhookEvents(broken), 'not a stream')
  await store.sadd(keys.webhookDue(broken), broken)
  await suspend(slowId)
  const stop = startWebhookConsumer(consumer, config.pollMs, pino({ level: 'silent' }))
  try {
    await until(() => receiver.received.length === 1)
  } finally {
    // The slow owner's POST is open; stop must wait for it to end and its try to be recorded.
    await stop()
  }
  const streamId = streamIdOf(slow, receiver.received[0]?.id as string) as string
  const tries = await store.hget(
    keys.webhookTries(slow, (await webhookIds(keys, slow))[0] as string),
    triesField(streamId),
  )
  await receiver.stop()
  expect(tries).toBe('1')
  // The owner whose drain failed is still flagged: the next pass tries it again, not the sweep.
  expect(await store.sismember(keys.webhookDue(broken), broken)).toBe(1)
}, 30_000)

async function webhookIds(keys: ReturnType<typeof keyspace>, owner: Owner) {
  return store.hkeys(keys.webhooks(owner))
}

test('a sweep run while every slot is busy leaves the owners it skipped flagged', async () => {
  const config: WebhookConfig = {
    allowLoopback: true,
    timeoutMs: 30_000,
    backoffMs: 50,
    maxAttempts: 3,
    pollMs: 20,
  }
  const { keys, consumer, supplier, suspend } = setup(config)
  const hanging = startReceiver(Array.from({ length: 32 }, () => 'hang' as const))
  const good = startReceiver()
  try {
    const ids: string[] = []
    for (let i = 0; i < 32; i++) ids.push((await supplier(hanging.url))[0])
    for (const id of ids) await suspend(id)
    // A pass holds 32 owners, each POST hanging: every slot of this replica is taken.
    const inflight = consumer.pass(false)
    await until(() => hanging.received.length === 32)
    // An event whose flag a replica took before it stopped: only a sweep finds it.
    const [leftId, left] = await supplier(good.url)
    await suspend(leftId)
    await store.srem(keys.webhookDue(left), left)
    await consumer.pass(true)
    await hanging.stop()
    await inflight
    // Ordinary passes from here on, the next sweep a minute away.
    for (let i = 0; i < 3 && good.received.length === 0; i++) await consumer.pass(false)
    expect(good.received).toHaveLength(1)
  } finally {
    await hanging.stop()
    await good.stop()
  }
}, 60_000)
