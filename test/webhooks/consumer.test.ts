// What a delivery consumer's pass reads: only the owners an event flagged (the script that writes
// the event flags its owner in the same call), so a pass costs the owners with something to send,
// not every owner with an endpoint; a sweep (the first pass, then now and then) reads every owner,
// so an event whose flag a stopped replica took is still sent; an owner with a retry waiting stays
// flagged until it is sent. Real Redis, the real scripts, a receiver of the test's own on loopback.
import { afterAll, afterEach, beforeEach, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import type { WebhookConfig } from '../../src/config.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { WebhookConsumer } from '../../src/webhooks/consumer.ts'
import { webhookParts } from '../../src/webhooks/endpoints.ts'
import { type Owner, supplierOwner } from '../../src/webhooks/events.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { type Answer, startReceiver } from './helpers.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-consumer' })
afterAll(() => store.close())

const CONFIG: WebhookConfig = {
  allowLoopback: true,
  // No receiver here hangs: a busy machine must not turn a slow answer into a failed delivery.
  timeoutMs: 10_000,
  backoffMs: 50,
  maxAttempts: 5,
  pollMs: 50,
}

let keys: Keyspace
let receiver: ReturnType<typeof startReceiver>
/** The streams the consumer read new events from, pass after pass. */
let read: string[]

beforeEach(() => {
  keys = keyspace(testPrefix())
  read = []
})
afterEach(() => receiver.stop())

/** The store as the consumer sees it, every XREADGROUP's stream noted in `read`. */
function noting(inner: Store): Store {
  return new Proxy(inner, {
    get(target, prop) {
      const value = Reflect.get(target, prop) as unknown
      if (typeof value !== 'function') return value
      if (prop !== 'xreadgroup') return value.bind(target)
      return (...args: unknown[]) => {
        read.push(String(args[args.indexOf('STREAMS') + 1]))
        return value.apply(target, args)
      }
    },
  })
}

/** Suppliers each with an endpoint at a receiver answering `script` first, and a consumer. */
async function suppliersWithEndpoints(count: number, script: Answer[] = []) {
  receiver = startReceiver(script)
  const { webhooks, deliveries } = webhookParts(store, keys, randomBytes(32), CONFIG)
  const ids = Array.from({ length: count }, () => `sup_${randomUUID()}`)
  for (const id of ids) {
    await store.hset(keys.supplier(id), 'id', id, 'status', 'active')
    await webhooks.create(supplierOwner(id), { url: receiver.url, events: ['supplier.suspended'] })
  }
  const consumer = new WebhookConsumer(noting(store), keys, webhooks, deliveries, CONFIG)
  return { ids, consumer }
}

/** The operator suspends the supplier: lua/supplier-status.lua writes supplier.suspended. */
const suspend = (id: string) =>
  runScript(store, 'supplierStatus', [keys.base], { supplierId: id, status: 'suspended' })
const flagged = async () => (await store.smembers(keys.webhookDueOfPrefix)).sort()
const sentTypes = () => receiver.unique().map((r) => (JSON.parse(r.body) as { type: string }).type)

test('a pass reads only the owners an event flagged; a sweep reads every owner', async () => {
  const { ids, consumer } = await suppliersWithEndpoints(40)
  // The first pass sweeps: every owner's stream, and nothing to send.
  await consumer.pass()
  expect(read).toHaveLength(40)
  read = []
  await consumer.pass(false)
  expect(read).toEqual([])

  // One supplier suspended: its script flags it, and the next pass reads its stream alone.
  const owner: Owner = supplierOwner(ids[7]!)
  await suspend(ids[7]!)
  expect(await flagged()).toEqual([owner])
  expect(await consumer.pass(false)).toBe(1)
  // Its stream alone (read an entry at a time: once for the event, once more to find no other).
  expect([...new Set(read)]).toEqual([keys.webhookEvents(owner)])
  expect(sentTypes()).toEqual(['supplier.suspended'])
  // Sent and acknowledged: no longer flagged, and the next pass reads nothing.
  expect(await flagged()).toEqual([])
  read = []
  await consumer.pass(false)
  expect(read).toEqual([])
  expect(receiver.received).toHaveLength(1)

  // A refused status change (no such supplier) writes nothing and flags no one.
  expect(await suspend(`sup_${randomUUID()}`)).toEqual([-1])
  expect(await flagged()).toEqual([])
})

test('an event whose flag a stopped replica took is sent by the next sweep', async () => {
  const { ids, consumer } = await suppliersWithEndpoints(3)
  await consumer.pass()
  await suspend(ids[1]!)
  // A replica took the flag and stopped before reading the stream.
  await store.srem(keys.webhookDueOfPrefix, supplierOwner(ids[1]!))
  expect(await consumer.pass(false)).toBe(0)
  expect(receiver.received).toEqual([])
  expect(await consumer.pass(true)).toBe(1)
  expect(sentTypes()).toEqual(['supplier.suspended'])
})

test('an owner with a retry waiting stays flagged until its event is sent', async () => {
  const { ids, consumer } = await suppliersWithEndpoints(2, [500])
  await consumer.pass()
  const owner = supplierOwner(ids[0]!)
  await suspend(ids[0]!)
  await consumer.pass(false)
  expect(receiver.received).toHaveLength(1)
  expect(await flagged()).toEqual([owner])
  // Passes without a sweep: the retry is claimed once due, and accepted.
  await until(async () => {
    await consumer.pass(false)
    return receiver.received.length >= 2
  })
  expect(sentTypes()).toEqual(['supplier.suspended'])
  expect(receiver.received.map((r) => r.id)).toEqual([receiver.received[0]!.id, receiver.received[0]!.id])
  await until(async () => {
    await consumer.pass(false)
    return (await flagged()).length === 0
  })
  expect(((await store.xpending(keys.webhookEvents(owner), 'deliver')) as [number])[0]).toBe(0)
  // Only that owner's stream was ever read between sweeps.
  expect(new Set(read.slice(2))).toEqual(new Set([keys.webhookEvents(owner)]))
})
