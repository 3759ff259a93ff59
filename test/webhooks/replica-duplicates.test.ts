// Two replicas consuming one owner's stream, behind a receiver that is slow on some events: an
// event one replica is about to send is not claimed and sent by the other as well. A claim waits
// out twice the POST timeout so that no try in flight elsewhere is repeated (src/webhooks/consumer.ts);
// a batch read at once and sent one event after another outlived that wait, and an event already
// accepted was sent again by the replica that claimed it. Real Redis, the real scripts, each
// replica's own loop (startWebhookConsumer), a receiver of the test's own on loopback.
import { afterAll, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import pino from 'pino'
import type { WebhookConfig } from '../../src/config.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { createStore } from '../../src/redis/store.ts'
import { startWebhookConsumer, WebhookConsumer } from '../../src/webhooks/consumer.ts'
import { webhookParts } from '../../src/webhooks/endpoints.ts'
import { supplierOwner } from '../../src/webhooks/events.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-webhooks-dup' })
afterAll(() => store.close())

test('an event accepted once is not sent again by another replica', async () => {
  const config: WebhookConfig = {
    allowLoopback: true,
    timeoutMs: 600,
    backoffMs: 50,
    maxAttempts: 2,
    pollMs: 20,
  }
  const keys = keyspace(testPrefix())
  const { webhooks, deliveries } = webhookParts(store, keys, randomBytes(32), config)
  // The first three events seen hang until the sender gives up; every other is accepted.
  const order: string[] = []
  const accepted: string[] = []
  const receiver = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    idleTimeout: 0,
    async fetch(request) {
      const id = request.headers.get('svc-webhook-id') ?? ''
      if (!order.includes(id)) order.push(id)
      if (order.indexOf(id) < 3) {
        await new Promise<void>((resolve) => request.signal.addEventListener('abort', () => resolve()))
        return new Response('late', { status: 503 })
      }
      accepted.push(id)
      return new Response('ok')
    },
  })
  const supplier = `sup_${randomUUID()}`
  const owner = supplierOwner(supplier)
  await store.hset(keys.supplier(supplier), 'id', supplier, 'status', 'active')
  await webhooks.create(owner, {
    url: `http://127.0.0.1:${receiver.port}/hook`,
    events: ['supplier.suspended', 'supplier.reinstated'],
  })
  // Four events: suspended, reinstated, suspended, reinstated.
  for (const status of ['suspended', 'active', 'suspended', 'active'])
    await runScript(store, 'supplierStatus', [keys.base], { supplierId: supplier, status })

  const replicas = [0, 1].map(() =>
    startWebhookConsumer(
      new WebhookConsumer(store, keys, webhooks, deliveries, config),
      config.pollMs,
      pino({ level: 'silent' }),
    ),
  )
  try {
    // Every event done (accepted, or out of tries) and acknowledged.
    await until(async () => {
      const pending = (await store.xpending(keys.webhookEvents(owner), 'deliver')) as [number]
      return order.length === 4 && Number(pending[0]) === 0
    })
  } finally {
    // Drained: whatever either replica still had in hand is sent before this returns.
    for (const stop of replicas) await stop()
    receiver.stop(true)
  }
  expect(order).toHaveLength(4)
  expect(accepted).toEqual([order[3]!])
})
