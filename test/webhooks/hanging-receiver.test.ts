// A receiver that never answers holds only its own deliveries: another owner's event, written
// while that POST hangs, is sent by the same replica's running consumer before the hanging one
// gives up (README: "one owner's backlog never delays another's"). Real Redis, the real scripts,
// the consumer's own loop (startWebhookConsumer), receivers of the test's own on loopback.
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

const store = createStore(testRedisUrl(), { name: 'svc-test-webhooks-hang' })
afterAll(() => store.close())

/** A receiver that holds every request open until the client gives up; counts those still open. */
function hangingReceiver() {
  let open = 0
  let got = 0
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    idleTimeout: 0,
    async fetch(request) {
      got++
      open++
      await new Promise<void>((resolve) => request.signal.addEventListener('abort', () => resolve()))
      open--
      return new Response('late')
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}/hook`,
    got: () => got,
    open: () => open,
    stop: () => server.stop(true),
  }
}

test("a hanging receiver does not hold up another owner's delivery", async () => {
  // Long enough that the hanging POST is still open when the other owner's event is sent.
  const config: WebhookConfig = {
    allowLoopback: true,
    timeoutMs: 30_000,
    backoffMs: 50,
    maxAttempts: 3,
    pollMs: 20,
  }
  const keys = keyspace(testPrefix())
  const { webhooks, deliveries } = webhookParts(store, keys, randomBytes(32), config)
  const hanging = hangingReceiver()
  const healthy: string[] = []
  const good = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: async (request) => {
      healthy.push(request.headers.get('svc-webhook-id') ?? '')
      return new Response('ok')
    },
  })
  const [slow, fast] = [`sup_${randomUUID()}`, `sup_${randomUUID()}`]
  for (const id of [slow, fast]) await store.hset(keys.supplier(id), 'id', id, 'status', 'active')
  await webhooks.create(supplierOwner(slow), { url: hanging.url, events: ['supplier.suspended'] })
  await webhooks.create(supplierOwner(fast), {
    url: `http://127.0.0.1:${good.port}/hook`,
    events: ['supplier.suspended'],
  })
  const consumer = new WebhookConsumer(store, keys, webhooks, deliveries, config)
  const stop = startWebhookConsumer(consumer, config.pollMs, pino({ level: 'silent' }))
  const suspend = (id: string) =>
    runScript(store, 'supplierStatus', [keys.base], { supplierId: id, status: 'suspended' })
  try {
    await suspend(slow)
    await until(() => hanging.got() === 1)
    // The slow owner's POST hangs; now the other owner's event is written.
    await suspend(fast)
    await until(() => healthy.length === 1 || hanging.open() === 0)
    // Sent while the hanging POST is still open, not only once it timed out.
    expect(hanging.open()).toBe(1)
    expect(healthy).toHaveLength(1)
  } finally {
    hanging.stop()
    await stop()
    good.stop(true)
  }
})
