// Owners whose receivers never answer, as many as a replica has slots and each with a backlog, do
// not hold every slot for their whole backlog: an honest owner's event written while they hang is
// sent while they still have events left to try (src/webhooks/consumer.ts: a drain yields after one
// try's time and slow owners hold at most half the slots). Real Redis, the consumer's own loop,
// receivers of the test's own on loopback; the events seeded as lua/lib/events.lua writes them.
import { afterAll, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import pino from 'pino'
import type { WebhookConfig } from '../../src/config.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { createStore } from '../../src/redis/store.ts'
import { startWebhookConsumer, WebhookConsumer } from '../../src/webhooks/consumer.ts'
import { webhookParts } from '../../src/webhooks/endpoints.ts'
import { type Owner, supplierOwner } from '../../src/webhooks/events.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { startReceiver } from './helpers.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-webhooks-slow-owners' })
afterAll(() => store.close())

const SLOTS = 4
const BACKLOG = 6

test("slow owners filling every slot do not hold back another owner's event for their backlog", async () => {
  // No retry comes due in the test: each slow event is tried once, each try runs to the timeout.
  const config: WebhookConfig = {
    allowLoopback: true,
    timeoutMs: 1_000,
    backoffMs: 600_000,
    maxAttempts: 8,
    pollMs: 20,
  }
  const keys = keyspace(testPrefix())
  const { webhooks, deliveries } = webhookParts(store, keys, randomBytes(32), config)
  const owner = async (url: string): Promise<Owner> => {
    const id = `sup_${randomUUID()}`
    await store.hset(keys.supplier(id), 'id', id, 'status', 'active')
    await webhooks.create(supplierOwner(id), { url, events: ['supplier.suspended'] })
    return supplierOwner(id)
  }
  const emit = async (to: Owner) => {
    const data = JSON.stringify({ supplierId: to.slice('supplier:'.length) })
    await store.xadd(
      keys.webhookEvents(to),
      '*',
      'type',
      'supplier.suspended',
      'at',
      Date.now(),
      'data',
      data,
    )
    await store.sadd(keys.webhookDue(to), to)
  }
  const slow = Array.from({ length: SLOTS }, () =>
    startReceiver(Array.from({ length: BACKLOG }, () => 'hang' as const)),
  )
  const honest = startReceiver()
  const consumer = new WebhookConsumer(store, keys, webhooks, deliveries, config, SLOTS)
  const stop = startWebhookConsumer(consumer, config.pollMs, pino({ level: 'silent' }))
  try {
    const slowOwners = await Promise.all(slow.map((receiver) => owner(receiver.url)))
    const honestOwner = await owner(honest.url)
    for (const to of slowOwners) for (let i = 0; i < BACKLOG; i++) await emit(to)
    // Every slot is held by a slow owner's hanging try.
    await until(() => slow.every((receiver) => receiver.received.length > 0))
    await emit(honestOwner)
    await until(
      () => honest.received.length > 0 || slow.every((receiver) => receiver.unique().length === BACKLOG),
    )
    expect(honest.received).toHaveLength(1)
    // Sent while the slow owners still had events waiting for their first try.
    expect(slow.map((receiver) => receiver.unique().length < BACKLOG)).toEqual(slow.map(() => true))
  } finally {
    for (const receiver of [...slow, honest]) await receiver.stop()
    await stop()
  }
}, 60_000)
