// Events out, at least once, signed: a receiver of the test's own on loopback (allowed by the
// test-only setting) that times out once, answers 500 once, then accepts; another that is down
// (nothing listening) before it times out, answers 500 and accepts. Each event is found
// exactly once after dedup by id, every signature is valid, and a refused or no-op request
// delivers nothing.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { verify } from '../../src/webhooks/signing.ts'
import { adminFetch, keyFetch } from '../helpers/accounts.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'
import { until } from '../helpers/wait.ts'
import { freePort, registerWebhook, startReceiver } from './helpers.ts'

describe('webhook delivery', () => {
  let stack: TestStack
  let supplier: TestSupplier
  const receiver = startReceiver(['hang', 500])
  beforeAll(async () => {
    stack = await startStack({
      env: { SVC_WEBHOOK_ALLOW_LOOPBACK: '1' },
      tune: (config) => {
        // Long enough that an accepting answer on a busy machine is never taken for a timeout, so
        // the tries counted are the scripted ones.
        config.webhooks.timeoutMs = 2_000
        config.webhooks.backoffMs = 100
        config.webhooks.pollMs = 50
      },
    })
    supplier = await signInSupplier(stack)
  })
  afterAll(async () => {
    await stack.stop()
    await receiver.stop()
  })

  const setStatus = (id: string, status: string) =>
    adminFetch(stack, `/admin/v1/suppliers/${id}`, { method: 'PATCH', json: { status } })

  test('a timeout and a 500 are retried; each event arrives once after dedup, signed', async () => {
    const created = await registerWebhook(stack, supplier.apiKey, '/v1/supplier', {
      url: receiver.url,
      events: ['supplier.suspended', 'supplier.reinstated'],
    })
    expect(created.status).toBe(201)
    const endpoint = (await created.json()) as { id: string; secret: string }

    // Refused and no-op requests: an unknown supplier (404), a status it already has.
    expect((await setStatus('sup_unknown', 'suspended')).status).toBe(404)
    expect((await setStatus(supplier.supplierId, 'active')).status).toBe(200)
    expect((await setStatus(supplier.supplierId, 'suspended')).status).toBe(200)
    expect((await setStatus(supplier.supplierId, 'suspended')).status).toBe(200)
    expect((await setStatus(supplier.supplierId, 'active')).status).toBe(200)

    await until(() => receiver.unique().length >= 2 && receiver.received.length >= 4)
    // The stream is fully acknowledged once both are in.
    await until(async () => {
      const pending = (await stack.store.xpending(
        stack.keys.webhookEvents(`supplier:${supplier.supplierId}`),
        'deliver',
      )) as [number]
      return pending[0] === 0
    })
    const events = receiver.unique().map((r) => {
      expect(verify(endpoint.secret, r.id, r.timestamp, r.body, r.signature)).toBe(true)
      const body = JSON.parse(r.body) as { id: string; type: string; data: { supplierId: string } }
      expect(body.id).toBe(r.id)
      expect(body.data.supplierId).toBe(supplier.supplierId)
      return body.type
    })
    expect(events).toEqual(['supplier.suspended', 'supplier.reinstated'])
    // Four tries in all: one timed out, one answered 500, and each event was then accepted.
    expect(receiver.received.length).toBe(4)
    // A wrong secret does not verify.
    const first = receiver.received[0]!
    expect(verify('whsec_wrong', first.id, first.timestamp, first.body, first.signature)).toBe(false)

    // The owner's delivery log, newest first, says it all; a replay sends the event again.
    const log = (await (
      await keyFetch(stack, supplier.apiKey, `/v1/supplier/webhooks/${endpoint.id}/deliveries`)
    ).json()) as {
      deliveries: { eventId: string; ok: boolean; httpStatus: number | null; attempt: number }[]
    }
    const outcomes = log.deliveries.map((d) => `${d.ok ? 'ok' : 'failed'} ${d.httpStatus}`).sort()
    expect(outcomes).toEqual(['failed 500', 'failed null', 'ok 200', 'ok 200'])
    for (const { id } of receiver.unique()) {
      const tries = log.deliveries.filter((d) => d.eventId === id)
      expect(tries[0]!.ok).toBe(true) // newest first: the last try was accepted
      expect(tries.map((d) => d.attempt)).toEqual(tries.map((_, i) => tries.length - i))
    }
    const replay = await keyFetch(
      stack,
      supplier.apiKey,
      `/v1/supplier/webhooks/${endpoint.id}/deliveries/${first.id}/replay`,
      { method: 'POST' },
    )
    expect(replay.status).toBe(200)
    expect(((await replay.json()) as { ok: boolean; replay: boolean }).ok).toBe(true)
    expect(receiver.received.length).toBe(5)
    expect(receiver.received[4]!.id).toBe(first.id)
    expect(receiver.unique().length).toBe(2)
  })

  test('a receiver down, then timing out, then answering 500, then accepting: the event arrives once, signed', async () => {
    const port = freePort()
    const other = await signInSupplier(stack)
    const created = await registerWebhook(stack, other.apiKey, '/v1/supplier', {
      url: `http://127.0.0.1:${port}/hook`,
      events: ['supplier.suspended'],
    })
    const endpoint = (await created.json()) as { id: string; secret: string }
    const log = async () =>
      (
        (await (
          await keyFetch(stack, other.apiKey, `/v1/supplier/webhooks/${endpoint.id}/deliveries`)
        ).json()) as { deliveries: { ok: boolean; httpStatus: number | null; error: string | null }[] }
      ).deliveries.reverse()
    expect((await setStatus(other.supplierId, 'suspended')).status).toBe(200)
    // Nothing listens yet: the first try fails to connect.
    await until(async () => (await log()).length >= 1)
    const late = startReceiver(['hang', 500], port)
    try {
      const stream = stack.keys.webhookEvents(`supplier:${other.supplierId}`)
      await until(async () => {
        const pending = (await stack.store.xpending(stream, 'deliver')) as [number]
        return late.unique().length === 1 && pending[0] === 0
      })
      const tries = await log()
      const down = tries.filter((t) => t.error === 'connection failed').length
      expect(down).toBeGreaterThanOrEqual(1)
      expect(tries.map((t) => [t.ok, t.httpStatus, t.error])).toEqual([
        ...Array.from({ length: down }, () => [false, null, 'connection failed']),
        [false, null, 'no answer in 2000 ms'],
        [false, 500, 'answered 500'],
        [true, 200, null],
      ])
      expect(late.received).toHaveLength(3)
      const [sent] = late.unique()
      expect(late.received.every((r) => r.id === sent!.id)).toBe(true)
      expect(verify(endpoint.secret, sent!.id, sent!.timestamp, sent!.body, sent!.signature)).toBe(true)
      expect(JSON.parse(sent!.body)).toMatchObject({
        type: 'supplier.suspended',
        data: { supplierId: other.supplierId },
      })
    } finally {
      await late.stop()
    }
  })
})
