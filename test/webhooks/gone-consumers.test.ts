// A replica's consumer in each owner's delivery group outlives the replica only until a sweep of
// another finds it idle with nothing pending (lua/webhook-forget.lua): restarts leave no pile of
// consumers behind, and an entry pending on a stopped replica keeps its consumer until another
// replica claims and sends it, so no event is lost. Real Redis, the real scripts, a receiver of the
// test's own on loopback.
import { afterAll, afterEach, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import type { WebhookConfig } from '../../src/config.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { createStore } from '../../src/redis/store.ts'
import { WebhookConsumer } from '../../src/webhooks/consumer.ts'
import { webhookParts } from '../../src/webhooks/endpoints.ts'
import { eventId } from '../../src/webhooks/event-ids.ts'
import { DELIVERY_GROUP, type Owner, supplierOwner } from '../../src/webhooks/events.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { startReceiver } from './helpers.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-gone-consumers' })
afterAll(() => store.close())
let receiver: ReturnType<typeof startReceiver>
afterEach(() => receiver.stop())

const CONFIG: WebhookConfig = {
  allowLoopback: true,
  // A claim waits twice this: an entry just read is not claimable within the test.
  timeoutMs: 10_000,
  backoffMs: 100,
  maxAttempts: 3,
  pollMs: 50,
}
// Idle this long with nothing pending, a consumer is dropped by a sweep (the default is minutes).
const FORGET_AFTER_MS = 50

interface ConsumerInfo {
  name: string
  pending: number
  idle: number
}

async function consumersOf(stream: string): Promise<ConsumerInfo[]> {
  const rows = (await store.xinfo('CONSUMERS', stream, DELIVERY_GROUP)) as (string | number)[][]
  return rows.map((row) => {
    const info = new Map<string, string | number>()
    for (let i = 0; i < row.length; i += 2) info.set(String(row[i]), row[i + 1]!)
    return {
      name: String(info.get('name')),
      pending: Number(info.get('pending')),
      idle: Number(info.get('idle')),
    }
  })
}

/** Until every consumer of these streams has been idle past FORGET_AFTER_MS, as Redis counts it. */
const untilAllIdle = (streams: string[]) =>
  until(async () => {
    const all = (await Promise.all(streams.map(consumersOf))).flat()
    return all.every((consumer) => consumer.idle > FORGET_AFTER_MS)
  })

async function suppliers(count: number) {
  const keys: Keyspace = keyspace(testPrefix())
  const { webhooks, deliveries } = webhookParts(store, keys, randomBytes(32), CONFIG)
  const ids: string[] = []
  for (let i = 0; i < count; i++) {
    const id = `sup_${randomUUID()}`
    await store.hset(keys.supplier(id), 'id', id, 'status', 'active')
    await webhooks.create(supplierOwner(id), { url: receiver.url, events: ['supplier.suspended'] })
    ids.push(id)
  }
  const owners: Owner[] = ids.map(supplierOwner)
  /** One event for each supplier (suspended, then active again without an event). */
  const eventEach = async () => {
    for (const id of ids) {
      await runScript(store, 'supplierStatus', [keys.base], { supplierId: id, status: 'suspended' })
      await runScript(store, 'supplierStatus', [keys.base], { supplierId: id, status: 'active' })
    }
  }
  const replica = () =>
    new WebhookConsumer(store, keys, webhooks, deliveries, CONFIG, undefined, FORGET_AFTER_MS)
  return { keys, owners, streams: owners.map((owner) => keys.webhookEvents(owner)), eventEach, replica }
}

/** Events received, each once. */
const sent = () => new Set(receiver.received.map((r) => r.id)).size

const pending = async (stream: string) => ((await store.xpending(stream, DELIVERY_GROUP)) as [number])[0]

test("restarted replicas leave no consumers behind in the owners' groups, and every event is sent", async () => {
  receiver = startReceiver()
  const { streams, eventEach, replica } = await suppliers(3)
  const first = replica()
  const restarts = 4
  for (let round = 1; round <= restarts; round++) {
    await eventEach()
    // The replicas before this one have stopped; each left its consumer in every owner's group.
    await untilAllIdle(streams)
    const running = round === 1 ? first : replica()
    await running.pass(true)
    expect(sent()).toBe(round * streams.length)
    for (const stream of streams) {
      const consumers = await consumersOf(stream)
      expect(consumers).toHaveLength(1)
      expect(consumers[0]!.pending).toBe(0)
    }
  }
  // The first replica's consumers were dropped while it had nothing pending: its next read makes
  // them again, and the event written meanwhile is sent.
  await eventEach()
  await first.pass(true)
  expect(sent()).toBe((restarts + 1) * streams.length)
  for (const stream of streams) expect(await pending(stream)).toBe(0)
  expect(receiver.received).toHaveLength(sent())
})

test('an entry pending on a stopped replica keeps its consumer until another replica claims and sends it', async () => {
  receiver = startReceiver()
  const { owners, streams, eventEach, replica } = await suppliers(1)
  const stream = streams[0]!
  await eventEach()
  // A replica read the event and stopped before sending it.
  const read = (await store.xreadgroup(
    'GROUP',
    DELIVERY_GROUP,
    'stopped-replica',
    'COUNT',
    1,
    'STREAMS',
    stream,
    '>',
  )) as [string, [string, string[]][]][]
  const entryId = read[0]![1][0]![0]
  await untilAllIdle(streams)
  // Its entry is not claimable yet (idle under a claim's wait): the sweep keeps its consumer.
  const running = replica()
  await running.pass(true)
  expect(receiver.received).toHaveLength(0)
  expect(await consumersOf(stream)).toEqual([
    expect.objectContaining({ name: 'stopped-replica', pending: 1 }),
  ])
  // Long idle now: the next sweep claims the entry, sends it, and then drops the stopped consumer.
  await store.xclaim(stream, DELIVERY_GROUP, 'stopped-replica', 0, entryId, 'IDLE', 3_600_000, 'JUSTID')
  await untilAllIdle(streams)
  await running.pass(true)
  expect(receiver.received.map((r) => r.id)).toEqual([eventId(owners[0]!, entryId)])
  expect(await pending(stream)).toBe(0)
  const consumers = await consumersOf(stream)
  expect(consumers.map((c) => c.name)).not.toContain('stopped-replica')
  expect(consumers).toHaveLength(1)
})
