// Rotating an endpoint's signing secret (POST .../webhooks/{id}/rotate-secret), checked as a
// receiver checks a delivery: an HMAC of its own with node:crypto and the Standard Webhooks
// library. The new secret is answered once; while the overlap lasts each delivery carries a
// signature by the new secret and one by the previous secret (space-separated "v1,<sig>"); an
// overlap of 0 ends the previous secret at once, and once an overlap has passed the previous
// secret signs nothing. An
// Idempotency-Key makes a retry answer the same secret; another owner, a limited key and bad
// input change nothing in Redis. The whole gateway, real Redis, a receiver of the test's own.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { Webhook } from 'standardwebhooks'
import { webhookParts } from '../../src/webhooks/endpoints.ts'
import { supplierOwner } from '../../src/webhooks/events.ts'
import { MAX_PREVIOUS_SECRETS } from '../../src/webhooks/rotation.ts'
import { adminFetch, createAccount, keyFetch, mintKey, waitForLastUsed } from '../helpers/accounts.ts'
import { snapshotKeys, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'
import { until } from '../helpers/wait.ts'
import { type Received, registerWebhook, startReceiver, startWebhookStack } from './helpers.ts'

let stack: TestStack
let supplier: TestSupplier
const receiver = startReceiver()
beforeAll(async () => {
  stack = await startWebhookStack()
  supplier = await signInSupplier(stack)
})
afterAll(async () => {
  await stack.stop()
  await receiver.stop()
})

/** A receiver's own check: some "v1,<sig>" of the header is the HMAC of this delivery under `secret`. */
function hmacVerifies(secret: string, got: Received): boolean {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64')
  const expected = createHmac('sha256', key).update(`${got.id}.${got.timestamp}.${got.body}`).digest()
  return got.signature.split(' ').some((part) => {
    const [version, signature] = part.split(',')
    const given = Buffer.from(signature ?? '', 'base64')
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected)
  })
}

/** Whether the Standard Webhooks library, holding only `secret`, accepts the delivery. */
function libraryVerifies(secret: string, got: Received): boolean {
  const headers = {
    'webhook-id': got.id,
    'webhook-timestamp': got.timestamp,
    'webhook-signature': got.signature,
  }
  try {
    new Webhook(secret).verify(got.body, headers)
    return true
  } catch {
    return false
  }
}

const verifiedBy = (secrets: string[], got: Received) =>
  secrets.map((secret) => [hmacVerifies(secret, got), libraryVerifies(secret, got)])

interface Rotated {
  id: string
  secret: string
  secretRotatedAt: number | null
  previousSecretsSignUntil: number | null
}

function rotate(
  apiKey: string,
  path: string,
  id: string,
  json?: unknown,
  headers: Record<string, string> = {},
) {
  return keyFetch(stack, apiKey, `${path}/webhooks/${id}/rotate-secret`, { method: 'POST', json, headers })
}

/** The next event (the supplier suspended or reinstated) as the receiver got it. */
let suspended = false
async function nextDelivery(): Promise<Received> {
  const seen = receiver.unique().length
  suspended = !suspended
  const status = suspended ? 'suspended' : 'active'
  const response = await adminFetch(stack, `/admin/v1/suppliers/${supplier.supplierId}`, {
    method: 'PATCH',
    json: { status },
  })
  expect(response.status).toBe(200)
  await until(() => receiver.unique().length > seen)
  return receiver.unique()[seen]!
}

test('while the overlap lasts both secrets sign each delivery; an overlap of 0 ends the previous one at once', async () => {
  const created = await registerWebhook(stack, supplier.apiKey, '/v1/supplier', {
    url: receiver.url,
    events: ['supplier.suspended', 'supplier.reinstated'],
  })
  expect(created.status).toBe(201)
  const first = (await created.json()) as Rotated
  expect(first.secretRotatedAt).toBeNull()
  expect(first.previousSecretsSignUntil).toBeNull()
  const before = await nextDelivery()
  expect(before.signature.split(' ')).toHaveLength(1)
  expect(verifiedBy([first.secret], before)).toEqual([[true, true]])

  // The default overlap: a day.
  const response = await rotate(supplier.apiKey, '/v1/supplier', first.id)
  expect(response.status).toBe(200)
  const second = (await response.json()) as Rotated
  expect(second.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
  expect(second.secret).not.toBe(first.secret)
  expect(second.previousSecretsSignUntil! - second.secretRotatedAt!).toBe(24 * 3600 * 1000)
  // Answered once: the list never shows it.
  const listed = await (await keyFetch(stack, supplier.apiKey, '/v1/supplier/webhooks')).text()
  expect(listed).not.toContain(second.secret)
  expect(listed).toContain(`"previousSecretsSignUntil":${second.previousSecretsSignUntil}`)
  const stored = await stack.store.hget(stack.keys.webhooks(`supplier:${supplier.supplierId}`), first.id)
  expect(stored).not.toContain(second.secret)
  expect(stored).not.toContain(first.secret)

  const during = await nextDelivery()
  expect(during.signature.split(' ')).toHaveLength(2)
  // A receiver holding either secret accepts it; one holding another endpoint's does not.
  expect(verifiedBy([second.secret, first.secret], during)).toEqual([
    [true, true],
    [true, true],
  ])
  const stranger = `whsec_${randomBytes(32).toString('base64')}`
  expect(verifiedBy([stranger], during)).toEqual([[false, false]])

  // A leaked secret: rotated with an overlap of 0, neither earlier secret signs from now on.
  const now = await rotate(supplier.apiKey, '/v1/supplier', first.id, { overlapSeconds: 0 })
  expect(now.status).toBe(200)
  const third = (await now.json()) as Rotated
  expect(third.previousSecretsSignUntil).toBeNull()
  const after = await nextDelivery()
  expect(after.signature.split(' ')).toHaveLength(1)
  expect(verifiedBy([third.secret, second.secret, first.secret], after)).toEqual([
    [true, true],
    [false, false],
    [false, false],
  ])
}, 60_000)

test('once its overlap has passed, the previous secret signs nothing', async () => {
  const { webhooks, deliveries } = webhookParts(
    stack.store,
    stack.keys,
    randomBytes(32),
    stack.config.webhooks,
  )
  const own = startReceiver()
  try {
    const owner = supplierOwner(`sup_${randomBytes(8).toString('hex')}`)
    const created = await webhooks.create(owner, { url: own.url, events: ['supplier.suspended'] })
    const { endpoint: rotated } = await webhooks.rotateSecret(owner, created.id, 1, null)
    const event = { id: 'evt_1-0', type: 'supplier.suspended', createdAt: Date.now(), data: {} }
    const [endpoint] = await webhooks.list(owner)
    // Sent within the overlap: both sign. (A slow machine past it proves the next check anyway.)
    const ends = rotated.previousSecretsSignUntil!
    await deliveries.send(owner, endpoint!, event, 1)
    if (Date.now() < ends) expect(own.received[0]!.signature.split(' ')).toHaveLength(2)
    await until(() => Date.now() > ends)
    await deliveries.send(owner, endpoint!, event, 2)
    const late = own.received[1]!
    expect(late.signature.split(' ')).toHaveLength(1)
    expect(verifiedBy([rotated.secret, created.secret], late)).toEqual([
      [true, true],
      [false, false],
    ])
  } finally {
    await own.stop()
  }
})

test('a try sends with the secrets as stored then: one read before a revoke signs by the new secret only', async () => {
  const { webhooks, deliveries } = webhookParts(
    stack.store,
    stack.keys,
    randomBytes(32),
    stack.config.webhooks,
  )
  const own = startReceiver()
  try {
    const owner = supplierOwner(`sup_${randomBytes(8).toString('hex')}`)
    const created = await webhooks.create(owner, { url: own.url, events: ['supplier.suspended'] })
    // The consumer read the endpoint, then its owner revoked the secret, then the try goes out.
    const [read] = await webhooks.list(owner)
    const { endpoint: revoked } = await webhooks.rotateSecret(owner, created.id, 0, null)
    const event = { id: 'evt_2-0', type: 'supplier.suspended', createdAt: Date.now(), data: {} }
    await deliveries.send(owner, read!, event, 1)
    expect(verifiedBy([revoked.secret, created.secret], own.received[0]!)).toEqual([
      [true, true],
      [false, false],
    ])
  } finally {
    await own.stop()
  }
})

test('an Idempotency-Key rotates once: the retry answers the same secret; another overlap is a 409', async () => {
  const created = await registerWebhook(stack, supplier.apiKey, '/v1/supplier', {
    url: receiver.url,
    events: ['payout.confirmed'],
  })
  const { id } = (await created.json()) as Rotated
  const headers = { 'idempotency-key': `rotate-${id}` }
  const first = await rotate(supplier.apiKey, '/v1/supplier', id, { overlapSeconds: 600 }, headers)
  expect(first.status).toBe(200)
  expect(first.headers.get('idempotent-replayed')).toBeNull()
  const made = (await first.json()) as Rotated
  const stored = await snapshotKeys(stack.store, stack.keys.prefix)

  const again = await rotate(supplier.apiKey, '/v1/supplier', id, { overlapSeconds: 600 }, headers)
  expect(again.status).toBe(200)
  expect(again.headers.get('idempotent-replayed')).toBe('true')
  expect(((await again.json()) as Rotated).secret).toBe(made.secret)
  const other = await rotate(supplier.apiKey, '/v1/supplier', id, { overlapSeconds: 0 }, headers)
  expect(other.status).toBe(409)
  expect(((await other.json()) as { error: { code: string } }).error.code).toBe('idempotency_key_reused')
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(stored)

  // A later rotation replaces the secret that key made: the key is not a new rotation.
  const next = await rotate(supplier.apiKey, '/v1/supplier', id, undefined, { 'idempotency-key': 'later' })
  expect(next.status).toBe(200)
  const replaced = await snapshotKeys(stack.store, stack.keys.prefix)
  const stale = await rotate(supplier.apiKey, '/v1/supplier', id, { overlapSeconds: 600 }, headers)
  expect(stale.status).toBe(409)
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(replaced)
})

test("another owner's key is a 404, a limited key a 403, bad input a 400: nothing changes in Redis", async () => {
  const owner = await createAccount(stack)
  const registered = await registerWebhook(stack, owner.apiKey, '/v1/agent', {
    url: receiver.url,
    events: ['funding.confirmed'],
  })
  expect(registered.status).toBe(201)
  const { id } = (await registered.json()) as Rotated
  const limited = await mintKey(stack, owner.apiKey, { name: 'limited', limitUsdc: '1' })
  const stranger = await createAccount(stack)
  for (const key of [owner.apiKey, limited.apiKey, stranger.apiKey]) await waitForLastUsed(stack, key)
  const before = await snapshotKeys(stack.store, stack.keys.prefix)

  const refusals: [string, Response, number, string][] = [
    ['stranger', await rotate(stranger.apiKey, '/v1/agent', id), 404, 'webhook_not_found'],
    ['supplier', await rotate(supplier.apiKey, '/v1/supplier', id), 404, 'webhook_not_found'],
    ['limited', await rotate(limited.apiKey, '/v1/agent', id), 403, 'key_limit_binding'],
    [
      'unknown id',
      await rotate(owner.apiKey, '/v1/agent', 'wh_000000000000000000000000'),
      404,
      'webhook_not_found',
    ],
    ['malformed id', await rotate(owner.apiKey, '/v1/agent', 'nope'), 404, 'webhook_not_found'],
    [
      'bad key',
      await rotate(owner.apiKey, '/v1/agent', id, undefined, { 'idempotency-key': 'has space' }),
      400,
      'invalid_idempotency_key',
    ],
  ]
  for (const body of [
    { overlapSeconds: -1 },
    { overlapSeconds: 1.5 },
    { overlapSeconds: '60' },
    { overlapSeconds: 7 * 24 * 3600 + 1 },
    { overlapSeconds: null },
    { overlap: 60 },
    [],
    'x',
  ])
    refusals.push([JSON.stringify(body), await rotate(owner.apiKey, '/v1/agent', id, body), 400, ''])
  for (const [name, response, status, code] of refusals) {
    const body = (await response.json()) as { error: { code: string; type: string } }
    expect([name, response.status, code === '' || body.error.code === code]).toEqual([name, status, true])
    if (status === 400) expect([name, body.error.type]).toEqual([name, 'invalid_request_error'])
  }
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)

  // The owner's own unlimited key rotates it, with no body at all.
  const rotated = await keyFetch(stack, owner.apiKey, `/v1/agent/webhooks/${id}/rotate-secret`, {
    method: 'POST',
  })
  expect(rotated.status).toBe(200)
  expect(((await rotated.json()) as Rotated).secret).toMatch(/^whsec_/)
})

test('a key whose secret a later rotation replaced is a 409 however that secret ended: an overlap of 0, or more rotations than previous secrets kept', async () => {
  const created = await registerWebhook(stack, supplier.apiKey, '/v1/supplier', {
    url: receiver.url,
    events: ['payout.confirmed'],
  })
  const { id } = (await created.json()) as Rotated
  const revoke = { 'idempotency-key': `revoke-${id}` }
  const first = await rotate(supplier.apiKey, '/v1/supplier', id, { overlapSeconds: 0 }, revoke)
  expect(first.status).toBe(200)
  const again = await rotate(supplier.apiKey, '/v1/supplier', id, { overlapSeconds: 0 }, revoke)
  expect(again.headers.get('idempotent-replayed')).toBe('true')
  expect(((await again.json()) as Rotated).secret).toBe(((await first.json()) as Rotated).secret)

  // Revoked again under another key: the first key's secret is gone, and no previous secret is kept.
  const later = await rotate(
    supplier.apiKey,
    '/v1/supplier',
    id,
    { overlapSeconds: 0 },
    { 'idempotency-key': 'l' },
  )
  expect(later.status).toBe(200)
  const revoked = await snapshotKeys(stack.store, stack.keys.prefix)
  const stale = await rotate(supplier.apiKey, '/v1/supplier', id, { overlapSeconds: 0 }, revoke)
  expect(stale.status).toBe(409)
  expect(((await stale.json()) as { error: { code: string } }).error.code).toBe('idempotency_key_reused')
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(revoked)

  // With an overlap: rotations past the previous secrets kept drop the first one's secret.
  const keyed = { 'idempotency-key': `overlap-${id}` }
  expect((await rotate(supplier.apiKey, '/v1/supplier', id, { overlapSeconds: 600 }, keyed)).status).toBe(200)
  for (let i = 0; i <= MAX_PREVIOUS_SECRETS; i++)
    expect((await rotate(supplier.apiKey, '/v1/supplier', id, { overlapSeconds: 600 })).status).toBe(200)
  const rotated = await snapshotKeys(stack.store, stack.keys.prefix)
  const late = await rotate(supplier.apiKey, '/v1/supplier', id, { overlapSeconds: 600 }, keyed)
  expect(late.status).toBe(409)
  expect(((await late.json()) as { error: { code: string } }).error.code).toBe('idempotency_key_reused')
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(rotated)
})
