// The README says deliveries are "Signed as Standard Webhooks do" with a `whsec_...` secret: a
// receiver that verifies with the Standard Webhooks reference library (the `standardwebhooks`
// package; the gateway's svc-webhook-* headers passed as its webhook-* ones) accepts a delivery,
// and refuses it under another secret or with a timestamp too old (a replay). Real Redis, the real
// registration and delivery, a receiver of the test's own on loopback.
import { afterAll, expect, setSystemTime, test } from 'bun:test'
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto'
import fc from 'fast-check'
import { Webhook } from 'standardwebhooks'
import type { WebhookConfig } from '../../src/config.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { createStore } from '../../src/redis/store.ts'
import { webhookParts } from '../../src/webhooks/endpoints.ts'
import { supplierOwner } from '../../src/webhooks/events.ts'
import { sign, verify } from '../../src/webhooks/signing.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { startReceiver } from '../webhooks/helpers.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-webhooks-sig' })
afterAll(() => store.close())

const CONFIG: WebhookConfig = {
  allowLoopback: true,
  timeoutMs: 10_000,
  backoffMs: 50,
  maxAttempts: 3,
  pollMs: 50,
}

test('a delivery verifies with the Standard Webhooks library and the secret shown once', async () => {
  const keys = keyspace(testPrefix())
  const { webhooks, deliveries } = webhookParts(store, keys, randomBytes(32), CONFIG)
  const receiver = startReceiver()
  try {
    const owner = supplierOwner(`sup_${randomUUID()}`)
    const created = await webhooks.create(owner, { url: receiver.url, events: ['supplier.suspended'] })
    const [endpoint] = await webhooks.list(owner)
    const event = {
      id: 'evt_1-0',
      type: 'supplier.suspended',
      createdAt: Date.now(),
      data: { a: '1.000000' },
    }
    const record = await deliveries.send(owner, endpoint!, event, 1)
    expect(record.ok).toBe(true)
    const [got] = receiver.received
    const headers = {
      'webhook-id': got!.id,
      'webhook-timestamp': got!.timestamp,
      'webhook-signature': got!.signature,
    }
    expect(new Webhook(created.secret).verify(got!.body, headers)).toEqual(JSON.parse(got!.body))
    // The project's own verify agrees.
    expect(verify(created.secret, got!.id, got!.timestamp, got!.body, got!.signature)).toBe(true)
    // Another endpoint's secret does not verify it.
    const other = await webhooks.create(owner, { url: receiver.url, events: ['supplier.suspended'] })
    expect(() => new Webhook(other.secret).verify(got!.body, headers)).toThrow()
    // Signed right but stamped an hour ago: the library refuses it as a replay.
    const old = Math.floor(Date.now() / 1000) - 3600
    const stale = {
      ...headers,
      'webhook-timestamp': String(old),
      'webhook-signature': sign(created.secret, got!.id, old, got!.body),
    }
    expect(() => new Webhook(created.secret).verify(got!.body, stale)).toThrow(/too old/i)
  } finally {
    await receiver.stop()
  }
})

/**
 * The README's recipe, as a receiver with only node:crypto writes it: the key is the base64 after
 * whsec_ decoded, the HMAC-SHA256 is over "<id>.<timestamp>.<raw body>", the header is "v1," and
 * its base64; compared in constant time, and refused when stamped more than 5 minutes off.
 */
function receiverVerifies(secret: string, id: string, timestamp: string, body: string, header: string) {
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > 300) return false
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64')
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest()
  return header.split(' ').some((part) => {
    const [version, signature] = part.split(',')
    const given = Buffer.from(signature ?? '', 'base64')
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected)
  })
}

test("a delivery verifies by the README's recipe with node:crypto alone; a changed byte does not", async () => {
  const keys = keyspace(testPrefix())
  const { webhooks, deliveries } = webhookParts(store, keys, randomBytes(32), CONFIG)
  const receiver = startReceiver()
  try {
    const owner = supplierOwner(`sup_${randomUUID()}`)
    const created = await webhooks.create(owner, { url: receiver.url, events: ['supplier.suspended'] })
    const [endpoint] = await webhooks.list(owner)
    const event = { id: 'evt_2-0', type: 'supplier.suspended', createdAt: Date.now(), data: {} }
    expect((await deliveries.send(owner, endpoint!, event, 1)).ok).toBe(true)
    const [got] = receiver.received
    const { id, timestamp, body, signature } = got!
    expect(JSON.parse(body).id).toBe(id)
    expect(receiverVerifies(created.secret, id, timestamp, body, signature)).toBe(true)
    expect(receiverVerifies(created.secret, id, timestamp, body.replace('}', ' }'), signature)).toBe(false)
    expect(receiverVerifies(created.secret, 'evt_3-0', timestamp, body, signature)).toBe(false)
    expect(receiverVerifies(created.secret, id, String(Number(timestamp) + 1), body, signature)).toBe(false)
  } finally {
    await receiver.stop()
  }
})

/** Whether the Standard Webhooks library accepts these headers for this body under this secret. */
function libraryAccepts(secret: string, id: string, timestamp: string, body: string, signature: string) {
  try {
    new Webhook(secret).verify(body, {
      'webhook-id': id,
      'webhook-timestamp': timestamp,
      'webhook-signature': signature,
    })
    return true
  } catch {
    return false
  }
}

test('verify refuses a delivery stamped more than 5 minutes before or after now, as a replay', () => {
  const secret = `whsec_${randomBytes(24).toString('base64')}`
  const body = '{"id":"evt_9-0"}'
  const now = Math.floor(Date.now() / 1000)
  const at = (stamped: number) =>
    verify(secret, 'evt_9-0', String(stamped), body, sign(secret, 'evt_9-0', stamped, body))
  expect(at(now)).toBe(true)
  expect(at(now - 3600)).toBe(false)
  expect(at(now - 301)).toBe(false)
  expect(at(now + 301)).toBe(false)
  expect(at(now + 3600)).toBe(false)
})

test('verify and the Standard Webhooks library accept and refuse the same deliveries', () => {
  const secret = `whsec_${randomBytes(24).toString('base64')}`
  const other = `whsec_${randomBytes(24).toString('base64')}`
  const id = 'evt_10-0'
  const body = '{"id":"evt_10-0","data":{}}'
  try {
    fc.assert(
      fc.property(
        // The clock anywhere in a second (the rule compares whole seconds), the stamp around the edges.
        fc.integer({ min: 1_700_000_000_000, max: 1_800_000_000_000 }),
        fc.oneof(fc.integer({ min: -400, max: 400 }), fc.constantFrom(-301, -300, -299, 299, 300, 301)),
        fc.boolean(),
        fc.constantFrom('signed', 'other secret', 'not a number', 'changed body'),
        (nowMs, offset, rotated, how) => {
          setSystemTime(new Date(nowMs))
          const stamped = Math.floor(nowMs / 1000) + offset
          const signedBy = how === 'other secret' ? other : secret
          const one = sign(signedBy, id, stamped, body)
          const signature = rotated ? `${sign(other, id, stamped, body)} ${one}` : one
          const timestamp = how === 'not a number' ? 'soon' : String(stamped)
          const sent = how === 'changed body' ? `${body} ` : body
          const ours = verify(secret, id, timestamp, sent, signature)
          expect(ours).toBe(libraryAccepts(secret, id, timestamp, sent, signature))
          expect(ours).toBe(how === 'signed' && Math.abs(offset) <= 300)
        },
      ),
      { numRuns: 300 },
    )
  } finally {
    setSystemTime()
  }
})

test('verify reads the timestamp as plain digits only, where the library takes a leading number', () => {
  const secret = `whsec_${randomBytes(24).toString('base64')}`
  const body = '{}'
  const now = Math.floor(Date.now() / 1000)
  const signature = sign(secret, 'evt_11-0', now, body)
  expect(verify(secret, 'evt_11-0', String(now), body, signature)).toBe(true)
  // The library reads "<now>abc" as <now> (parseInt); a header that is not a number is refused here.
  for (const timestamp of [`${now}abc`, ` ${now}`, `${now}.0`, '', `-${now}`])
    expect(verify(secret, 'evt_11-0', timestamp, body, signature)).toBe(false)
})
