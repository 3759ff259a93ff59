// Removing an endpoint removes all it left in Redis: its delivery log and its tries, not only its
// record. Otherwise an owner registering an endpoint, replaying one event to it and removing it,
// again and again (5 at a time, no cost), grows Redis without bound: a log of up to 100 tries
// per endpoint ever made. So does a removal while a try to the endpoint is in flight: the try's
// outcome, written after, is not left behind either. Real Redis, the real scripts, a receiver of
// the test's own on loopback.
import { afterAll, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import type { WebhookConfig } from '../../src/config.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { createStore } from '../../src/redis/store.ts'
import { WebhookConsumer } from '../../src/webhooks/consumer.ts'
import { webhookParts } from '../../src/webhooks/endpoints.ts'
import { supplierOwner } from '../../src/webhooks/events.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { startReceiver } from '../webhooks/helpers.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-webhooks-leftovers' })
afterAll(() => store.close())

const CONFIG: WebhookConfig = {
  allowLoopback: true,
  timeoutMs: 10_000,
  backoffMs: 50,
  maxAttempts: 3,
  pollMs: 50,
}

test('an endpoint removed leaves neither its delivery log nor its tries behind', async () => {
  const keys = keyspace(testPrefix())
  const { webhooks, deliveries } = webhookParts(store, keys, randomBytes(32), CONFIG)
  // The first try fails, so a tries record is written and a retry waits.
  const receiver = startReceiver([500])
  try {
    const supplier = `sup_${randomUUID()}`
    const owner = supplierOwner(supplier)
    await store.hset(keys.supplier(supplier), 'id', supplier, 'status', 'active')
    const created = await webhooks.create(owner, { url: receiver.url, events: ['supplier.suspended'] })
    await runScript(store, 'supplierStatus', [keys.base], { supplierId: supplier, status: 'suspended' })
    const consumer = new WebhookConsumer(store, keys, webhooks, deliveries, CONFIG)
    await until(async () => {
      await consumer.pass()
      return receiver.received.length >= 1
    })
    const [endpoint] = await webhooks.list(owner)
    // The owner replays the event too: one more try in the log.
    await deliveries.replay(owner, endpoint!, receiver.received[0]!.id)
    const log = keys.webhookLog(owner, created.id)
    const tries = keys.webhookTries(owner, created.id)
    expect(await store.exists(log)).toBe(1)
    expect(await store.exists(tries)).toBe(1)

    await webhooks.remove(owner, created.id)
    expect(await store.exists(log)).toBe(0)
    expect(await store.exists(tries)).toBe(0)
  } finally {
    await receiver.stop()
  }
})

test('an endpoint removed while a try to it is in flight leaves neither its log nor its tries behind', async () => {
  const keys = keyspace(testPrefix())
  const { webhooks, deliveries } = webhookParts(store, keys, randomBytes(32), CONFIG)
  // The consumer's try hangs until the receiver stops; the owner's replay hangs too.
  const receiver = startReceiver(['hang', 'hang'])
  try {
    const supplier = `sup_${randomUUID()}`
    const owner = supplierOwner(supplier)
    await store.hset(keys.supplier(supplier), 'id', supplier, 'status', 'active')
    const created = await webhooks.create(owner, { url: receiver.url, events: ['supplier.suspended'] })
    await runScript(store, 'supplierStatus', [keys.base], { supplierId: supplier, status: 'suspended' })
    const consumer = new WebhookConsumer(store, keys, webhooks, deliveries, CONFIG)
    const [endpoint] = await webhooks.list(owner)
    const pass = consumer.pass(true)
    await until(() => receiver.received.length === 1)
    const replay = deliveries.replay(owner, endpoint!, receiver.received[0]!.id)
    await until(() => receiver.received.length === 2)

    // Removed while both tries wait on the receiver; then the receiver goes and both tries end.
    await webhooks.remove(owner, created.id)
    await receiver.stop()
    await Promise.all([pass, replay])
    expect(await store.exists(keys.webhookLog(owner, created.id))).toBe(0)
    expect(await store.exists(keys.webhookTries(owner, created.id))).toBe(0)
  } finally {
    await receiver.stop()
  }
})
