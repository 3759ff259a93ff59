// Registering webhook endpoints: only public http(s) URLs (checked after DNS), loopback only with
// the test-only setting, bounded per owner; a refusal is a 4xx in the contract's shape and writes
// nothing. The secret is shown once and stored sealed.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { addressAllowed } from '../../src/webhooks/address-check.ts'
import { createAccount, keyFetch, waitForLastUsed } from '../helpers/accounts.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { registerWebhook } from './helpers.ts'

const strict = { allowLoopback: false }

describe('addresses a delivery may connect to', () => {
  test('public v4 and v6 pass', () => {
    for (const ip of [
      '93.184.216.34',
      '8.8.8.8',
      '2606:4700::1111',
      '2a00:1450::1',
      '2002:5db8:d822::1',
      '192.0.1.1',
    ])
      expect([ip, addressAllowed(ip, strict)]).toEqual([ip, true])
  })
  test('loopback, private, link-local, unique-local, multicast, unspecified, protocol assignments and v4 inside v6 (mapped, translated, 6to4, Teredo) are refused', () => {
    const refused = [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '::1',
      '::',
      'fe80::1',
      'fd00::1',
      'fc00::5',
      'ff02::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
      '::ffff:169.254.169.254',
      '::ffff:7f00:1',
      '::ffff:0:127.0.0.1',
      '::ffff:0:10.0.0.1',
      '2002:7f00:1::1',
      '2002:a9fe:a9fe::',
      '2001:0:4136:e378::1',
      '192.0.0.192',
      'not-an-ip',
    ]
    for (const ip of refused) expect([ip, addressAllowed(ip, strict)]).toEqual([ip, false])
  })
  test('the test-only setting lets loopback through, and nothing else', () => {
    const loose = { allowLoopback: true }
    expect(addressAllowed('127.0.0.1', loose)).toBe(true)
    expect(addressAllowed('::1', loose)).toBe(true)
    expect(addressAllowed('::ffff:127.0.0.1', loose)).toBe(true)
    for (const ip of ['10.0.0.1', '169.254.169.254', 'fd00::1', '192.168.0.1'])
      expect([ip, addressAllowed(ip, loose)]).toEqual([ip, false])
  })
})

describe('registration over HTTP', () => {
  let stack: TestStack
  let apiKey: string
  beforeAll(async () => {
    // No SVC_WEBHOOK_ALLOW_LOOPBACK: the default, as in production.
    stack = await startStack()
    apiKey = (await createAccount(stack)).apiKey
    // The key's first use stamps lastUsedAt, after the response: done before any snapshot.
    await waitForLastUsed(stack, apiKey)
  })
  afterAll(() => stack.stop())

  test('a non-public or malformed URL is a 400 and nothing is written', async () => {
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const urls = [
      'http://127.0.0.1:9/hook',
      'http://localhost:9/hook',
      'http://[::1]:9/hook',
      'http://10.0.0.7/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://[fd00::1]/hook',
      'http://[::ffff:127.0.0.1]/hook',
      'http://0.0.0.0/hook',
      'ftp://93.184.216.34/hook',
      'http://user:pw@93.184.216.34/hook',
      'not a url',
    ]
    for (const url of urls) {
      const response = await registerWebhook(stack, apiKey, '/v1/agent', {
        url,
        events: ['funding.confirmed'],
      })
      const body = (await response.json()) as { error: { type: string; code: string } }
      expect([url, response.status, body.error.type]).toEqual([url, 400, 'invalid_request_error'])
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })

  test('events the owner cannot have, a threshold without balance.low and the reverse are 400s', async () => {
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const url = 'http://93.184.216.34/hook'
    for (const json of [
      { url, events: ['payout.confirmed'] },
      { url, events: ['nope'] },
      { url, events: [] },
      { url, events: ['balance.low'] },
      { url, events: ['funding.confirmed'], balanceThresholdUsdc: '5.000000' },
      { url, events: ['balance.low'], balanceThresholdUsdc: '-1' },
      { url, events: ['balance.low'], balanceThresholdUsdc: 5 },
    ]) {
      const response = await registerWebhook(stack, apiKey, '/v1/agent', json)
      expect([JSON.stringify(json), response.status]).toEqual([JSON.stringify(json), 400])
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })

  test('without a key: 401', async () => {
    const response = await keyFetch(stack, null, '/v1/agent/webhooks', {
      method: 'POST',
      json: { url: 'http://93.184.216.34/', events: ['funding.confirmed'] },
    })
    expect(response.status).toBe(401)
  })

  test('a public URL registers; the secret is shown once and stored sealed; the owner lists and removes it', async () => {
    const owner = await createAccount(stack)
    const created = await registerWebhook(stack, owner.apiKey, '/v1/agent', {
      url: 'http://93.184.216.34/hook',
      events: ['balance.low', 'key.budget.80'],
      balanceThresholdUsdc: '2.5',
    })
    expect(created.status).toBe(201)
    const endpoint = (await created.json()) as { id: string; secret: string; balanceThresholdUsdc: string }
    expect(endpoint.secret).toMatch(/^whsec_/)
    expect(endpoint.balanceThresholdUsdc).toBe('2.500000')
    const stored = await stack.store.hget(stack.keys.webhooks(`acct:${owner.accountId}`), endpoint.id)
    expect(stored).not.toContain(endpoint.secret)
    // The account counts its endpoints where a clear reads it, from 0 when it was made.
    expect(await stack.store.hget(stack.keys.account(owner.accountId), 'hooks')).toBe('1')
    const listed = (await (await keyFetch(stack, owner.apiKey, '/v1/agent/webhooks')).json()) as {
      webhooks: Record<string, unknown>[]
    }
    expect(listed.webhooks.map((w) => w.id)).toEqual([endpoint.id])
    expect(JSON.stringify(listed)).not.toContain(endpoint.secret)
    // Another account sees none of it.
    const other = await createAccount(stack)
    const otherDelete = await keyFetch(stack, other.apiKey, `/v1/agent/webhooks/${endpoint.id}`, {
      method: 'DELETE',
    })
    expect(otherDelete.status).toBe(404)
    const removed = await keyFetch(stack, owner.apiKey, `/v1/agent/webhooks/${endpoint.id}`, {
      method: 'DELETE',
    })
    expect(removed.status).toBe(200)
    // The scripts' hooks hash no longer names its types: no event is written for it any more.
    expect(await stack.store.hgetall(stack.keys.webhookHooks(`acct:${owner.accountId}`))).toEqual({})
    expect(await stack.store.hget(stack.keys.account(owner.accountId), 'hooks')).toBe('0')
  })

  test('an owner has at most 5 endpoints: the sixth is a 409 and writes nothing', async () => {
    const owner = await createAccount(stack)
    await waitForLastUsed(stack, owner.apiKey)
    for (let i = 0; i < 5; i++) {
      const response = await registerWebhook(stack, owner.apiKey, '/v1/agent', {
        url: `http://93.184.216.34/hook/${i}`,
        events: ['funding.confirmed'],
      })
      expect(response.status).toBe(201)
    }
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const sixth = await registerWebhook(stack, owner.apiKey, '/v1/agent', {
      url: 'http://93.184.216.34/hook/6',
      events: ['funding.confirmed'],
    })
    expect(sixth.status).toBe(409)
    expect(((await sixth.json()) as { error: { code: string } }).error.code).toBe('too_many_webhooks')
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })
})
