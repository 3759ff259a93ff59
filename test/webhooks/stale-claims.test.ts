// A backlog of stale deliveries (a replica stopped after reading them) is claimed back in batches,
// not one XAUTOCLAIM per entry: each entry still sent once and acknowledged on its own, a failed one
// left pending with its try counted for the retry schedule. A drain that runs out of time hands the
// entries it claimed and did not start back at once, so another replica sends them without waiting
// out a fresh claim. Real Redis, the real scripts, a receiver of the test's own on loopback.
import { afterAll, afterEach, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import type { WebhookConfig } from '../../src/config.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { CLAIM_BATCH, WebhookConsumer } from '../../src/webhooks/consumer.ts'
import { webhookParts } from '../../src/webhooks/endpoints.ts'
import { triesField } from '../../src/webhooks/event-ids.ts'
import { DELIVERY_GROUP, supplierOwner } from '../../src/webhooks/events.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { type Answer, startReceiver } from './helpers.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-stale-claims' })
afterAll(() => store.close())
let receiver: ReturnType<typeof startReceiver>
afterEach(() => receiver.stop())

/** The store as a consumer sees it, each XAUTOCLAIM it sends counted. */
function counting(inner: Store, claims: { count: number }): Store {
  return new Proxy(inner, {
    get(target, prop) {
      const value = Reflect.get(target, prop) as unknown
      if (typeof value !== 'function') return value
      if (prop !== 'xautoclaim') return value.bind(target)
      return (...args: unknown[]) => {
        claims.count++
        return value.apply(target, args)
      }
    },
  })
}

/**
 * A supplier with an endpoint at a receiver answering `script` first, `events` events in its
 * stream read by a replica that stopped before sending them (left pending there, idle long since).
 */
async function staleBacklog(config: WebhookConfig, events: number, script: Answer[]) {
  const keys: Keyspace = keyspace(testPrefix())
  receiver = startReceiver(script)
  const { webhooks, deliveries } = webhookParts(store, keys, randomBytes(32), config)
  const id = `sup_${randomUUID()}`
  const owner = supplierOwner(id)
  await store.hset(keys.supplier(id), 'id', id, 'status', 'active')
  await webhooks.create(owner, {
    url: receiver.url,
    events: ['supplier.suspended', 'supplier.reinstated'],
  })
  for (let i = 0; i < events; i++)
    await runScript(store, 'supplierStatus', [keys.base], {
      supplierId: id,
      status: i % 2 === 0 ? 'suspended' : 'active',
    })
  const stream = keys.webhookEvents(owner)
  const read = (await store.xreadgroup(
    'GROUP',
    DELIVERY_GROUP,
    'stopped-replica',
    'COUNT',
    events,
    'STREAMS',
    stream,
    '>',
  )) as [string, [string, string[]][]][]
  const ids = read[0]![1].map(([entryId]) => entryId)
  expect(ids).toHaveLength(events)
  await store.xclaim(stream, DELIVERY_GROUP, 'stopped-replica', 0, ...ids, 'IDLE', 3_600_000, 'JUSTID')
  const consumer = (claims: { count: number }) =>
    new WebhookConsumer(counting(store, claims), keys, webhooks, deliveries, config)
  return { keys, owner, stream, ids, consumer }
}

const pending = async (stream: string) => ((await store.xpending(stream, DELIVERY_GROUP)) as [number])[0]

test('a stale backlog is claimed in batches: each entry sent once and acknowledged, a failed try left to its retry', async () => {
  const config: WebhookConfig = {
    allowLoopback: true,
    timeoutMs: 10_000,
    backoffMs: 60_000,
    maxAttempts: 5,
    pollMs: 50,
  }
  const events = 25
  const { keys, owner, stream, ids, consumer } = await staleBacklog(config, events, [500])
  const claims = { count: 0 }
  expect(await consumer(claims).pass(true)).toBe(events)

  expect(receiver.unique()).toHaveLength(events)
  expect(receiver.received).toHaveLength(events)
  expect(claims.count).toBeLessThanOrEqual(Math.ceil(events / CLAIM_BATCH) + 1)
  // The first entry's try answered 500: it alone waits, its try counted, for a retry after backoff.
  expect(await pending(stream)).toBe(1)
  const [endpoint] = await store.hkeys(keys.webhooks(owner))
  const tries = await store.hget(keys.webhookTries(owner, endpoint!), triesField(ids[0]!))
  expect(tries).toBe('1')
})

test('a drain out of time hands back the stale entries it claimed and did not start', async () => {
  const config: WebhookConfig = {
    allowLoopback: true,
    // The first try hangs past this: the drain yields after it.
    timeoutMs: 500,
    // Past the test's own limit: an entry claimed and not handed back is claimable again only then.
    backoffMs: 600_000,
    maxAttempts: 5,
    pollMs: 50,
  }
  const events = CLAIM_BATCH + 2
  const { stream, consumer } = await staleBacklog(config, events, ['hang'])
  await consumer({ count: 0 }).pass(true)
  expect(receiver.received).toHaveLength(1)
  // Another replica at once: every entry but the one tried is claimable there and sent, over as
  // many of its passes as a busy machine makes it yield.
  const other = consumer({ count: 0 })
  await until(async () => {
    await other.pass(true)
    return receiver.unique().length >= events
  })
  expect(receiver.unique()).toHaveLength(events)
  expect(receiver.received).toHaveLength(events)
  expect(await pending(stream)).toBe(1)
})
