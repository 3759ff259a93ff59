// Keys with spending limits over real HTTP on a real Redis, with the simulated supplier: mint with a
// limit, change it (PATCH /v1/agent/keys/{id}), spentUsdc exact after real requests, 403
// key_limit_exceeded recorded as the request's refused attempt, history kept after a revoke, and
// every bad input a 400 (or 404) that changes nothing in Redis.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { auditAll } from '../../src/cli/audit.ts'
import { formatMicros } from '../../src/money/units.ts'
import {
  keyFetch,
  type ListedKey,
  listedKey,
  type MintedKey,
  mintKey,
  type TestAccount,
  waitForLastUsed,
} from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startStack()
  await simOffer(stack, 40, { capacityDiem: '1000' })
})
afterAll(() => stack.stop())

type KeyView = ListedKey
type Minted = MintedKey
type ErrorBody = { error: { message: string; type: string; code: string } & Record<string, unknown> }

const call = (apiKey: string, path: string, init: RequestInit & { json?: unknown } = {}) =>
  keyFetch(stack, apiKey, path, init)
const mint = (buyer: TestAccount, json: Record<string, unknown>) => mintKey(stack, buyer.apiKey, json)
const listed = (buyer: TestAccount, id: string) => listedKey(stack, buyer.apiKey, id)
// At 40 cents, the model's most output (8,192 tokens at 2.8 DIEM a million) holds about 0.0092 USDC.
const chat = (apiKey: string, maxTokens: number | null = 16) =>
  call(apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: {
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'hi' }],
      ...(maxTokens === null ? {} : { max_tokens: maxTokens }),
    },
  })

describe('mint and list with a limit', () => {
  test('the mint answer and the list carry limitUsdc, spentUsdc and limitRemainingUsdc', async () => {
    const buyer = await fundedBuyer(stack)
    const key = await mint(buyer, { name: 'agent', limitUsdc: '5' })
    expect(key).toMatchObject({
      limitUsdc: '5.000000',
      spentUsdc: '0.000000',
      limitRemainingUsdc: '5.000000',
    })
    expect(await listed(buyer, key.id)).toMatchObject({
      name: 'agent',
      limitUsdc: '5.000000',
      spentUsdc: '0.000000',
      limitRemainingUsdc: '5.000000',
    })
    const plain = await mint(buyer, { name: 'unlimited' })
    expect(plain).toMatchObject({ limitUsdc: null, spentUsdc: '0.000000', limitRemainingUsdc: null })
  })
})

describe('spending through a limited key', () => {
  test('spentUsdc is exactly what the key was charged; past the limit a 403 with a support reference', async () => {
    const buyer = await fundedBuyer(stack)
    const key = await mint(buyer, { name: 'agent', limitUsdc: '0.005000' })
    let charged = 0
    // The second names no max_tokens: its limit is fitted to what the key has left, not refused.
    for (const maxTokens of [16, null]) {
      const response = await chat(key.apiKey, maxTokens)
      expect(response.status).toBe(200)
      charged += Math.round(Number(response.headers.get('x-svc-cost-usdc')) * 1e6)
    }
    const after = (await listed(buyer, key.id))!
    expect(after.spentUsdc).toBe(formatMicros(charged))
    expect(after.limitRemainingUsdc).toBe(formatMicros(5_000 - charged))
    // A worst case beyond what is left: refused before any supplier is called.
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const refused = await chat(key.apiKey, 8_192)
    expect(refused.status).toBe(403)
    const body = (await refused.json()) as ErrorBody
    expect(body.error.code).toBe('key_limit_exceeded')
    expect(body.error.type).toBe('permission_error')
    expect(body.error.limitUsdc).toBe('0.005000')
    expect(body).not.toHaveProperty('accepts')
    const reference = refused.headers.get('x-svc-support-reference')!
    expect(reference).toMatch(/^sr_/)
    // Nothing charged: the account is as it was; only the refusal's record was added.
    await waitForLastUsed(stack, key.apiKey)
    const snapshotAccount = (await snapshotKeys(stack.store, stack.keys.prefix))[
      stack.keys.account(buyer.accountId)
    ]
    expect(snapshotAccount).toBe(before[stack.keys.account(buyer.accountId)])
    const record = (await (await call(buyer.apiKey, `/v1/agent/requests/${reference}`)).json()) as {
      status: string
      errorCode: string
      costUsdc: string
    }
    expect(record).toMatchObject({ status: 'refused', errorCode: 'key_limit_exceeded', costUsdc: '0.000000' })
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })

  test('raising the limit lets the key spend again; null removes it; a revoked key keeps its history', async () => {
    const buyer = await fundedBuyer(stack)
    const key = await mint(buyer, { name: 'agent', limitUsdc: '0' })
    expect((await chat(key.apiKey)).status).toBe(403)
    const raised = await call(buyer.apiKey, `/v1/agent/keys/${key.id}`, {
      method: 'PATCH',
      json: { limitUsdc: '1.5', name: 'renamed' },
    })
    expect(raised.status).toBe(200)
    expect(await raised.json()).toMatchObject({ id: key.id, name: 'renamed', limitUsdc: '1.500000' })
    expect((await chat(key.apiKey)).status).toBe(200)
    const cleared = await call(buyer.apiKey, `/v1/agent/keys/${key.id}`, {
      method: 'PATCH',
      json: { limitUsdc: null },
    })
    expect(await cleared.json()).toMatchObject({ name: 'renamed', limitUsdc: null, limitRemainingUsdc: null })
    const spent = (await listed(buyer, key.id))!.spentUsdc
    expect(spent).not.toBe('0.000000')
    expect((await call(buyer.apiKey, `/v1/agent/keys/${key.id}`, { method: 'DELETE' })).status).toBe(200)
    expect(await stack.store.hget(stack.keys.account(buyer.accountId), `spent:${key.id}`)).toBe(
      String(Math.round(Number(spent) * 1e6)),
    )
  })

  test('a limit below what the key already spent is a 409 that changes nothing', async () => {
    const buyer = await fundedBuyer(stack)
    const key = await mint(buyer, { name: 'agent', limitUsdc: '1' })
    expect((await chat(key.apiKey)).status).toBe(200)
    await waitForLastUsed(stack, key.apiKey)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const response = await call(buyer.apiKey, `/v1/agent/keys/${key.id}`, {
      method: 'PATCH',
      json: { limitUsdc: '0' },
    })
    expect(response.status).toBe(409)
    expect(((await response.json()) as ErrorBody).error.code).toBe('key_limit_below_spent')
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })
})

describe('bad input changes nothing', () => {
  test('every malformed mint or PATCH is a 400; an unknown or foreign key id a 404', async () => {
    const buyer = await fundedBuyer(stack)
    const other = await fundedBuyer(stack)
    const key = await mint(buyer, { name: 'agent', limitUsdc: '2' })
    const foreign = await mint(other, { name: 'theirs' })
    await waitForLastUsed(stack, buyer.apiKey)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const mints = [
      { name: 'x', limitUsdc: 5 },
      { name: 'x', limitUsdc: '-1' },
      { name: 'x', limitUsdc: '1.1234567' },
      { name: 'x', limitUsdc: '1e3' },
      { name: 'x', limitUsdc: '' },
      { name: 'x', limitUsdc: null },
      { name: 'x', limitUsdc: '99999999' },
      { name: 'x', limitUsdc: '1000000.000001' },
    ]
    for (const json of mints) {
      const response = await call(buyer.apiKey, '/v1/agent/keys', { method: 'POST', json })
      expect([response.status, JSON.stringify(json)]).toEqual([400, JSON.stringify(json)])
      expect(((await response.json()) as ErrorBody).error.type).toBe('invalid_request_error')
    }
    const patches = [
      {},
      { limitUsdc: 2 },
      { limitUsdc: 'two' },
      { limitUsdc: '-0.5' },
      { limitUsdc: '1000000.000001' },
      { name: '' },
      { name: 'x'.repeat(65) },
      { limitUsdc: '1', extra: true },
    ]
    for (const json of patches) {
      const response = await call(buyer.apiKey, `/v1/agent/keys/${key.id}`, { method: 'PATCH', json })
      expect([response.status, JSON.stringify(json)]).toEqual([400, JSON.stringify(json)])
    }
    const notJson = await call(buyer.apiKey, `/v1/agent/keys/${key.id}`, {
      method: 'PATCH',
      body: '{',
      headers: { 'content-type': 'application/json' },
    })
    expect(notJson.status).toBe(400)
    for (const id of [foreign.id, '00000000-0000-0000-0000-000000000000', 'nope']) {
      const response = await call(buyer.apiKey, `/v1/agent/keys/${id}`, {
        method: 'PATCH',
        json: { limitUsdc: '1' },
      })
      expect(response.status).toBe(404)
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })
})

describe('a limited key binds the agent that holds it', () => {
  const patch = (apiKey: string, id: string, json: unknown) =>
    call(apiKey, `/v1/agent/keys/${id}`, { method: 'PATCH', json })
  const expectBinding = async (response: Response) => {
    expect(response.status).toBe(403)
    expect(((await response.json()) as ErrorBody).error.code).toBe('key_limit_binding')
  }

  test('it cannot raise or remove a limit, touch an unlimited key, nor mint a key without a limit or past what it has left', async () => {
    const buyer = await fundedBuyer(stack)
    const agent = await mint(buyer, { name: 'agent', limitUsdc: '1' })
    const sibling = await mint(buyer, { name: 'sibling', limitUsdc: '2' })
    await waitForLastUsed(stack, agent.apiKey)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    await expectBinding(await patch(agent.apiKey, agent.id, { limitUsdc: null }))
    await expectBinding(await patch(agent.apiKey, agent.id, { limitUsdc: '1.000001' }))
    await expectBinding(await patch(agent.apiKey, sibling.id, { limitUsdc: '3' }))
    await expectBinding(await patch(agent.apiKey, sibling.id, { limitUsdc: null }))
    const own = (await (await call(buyer.apiKey, '/v1/agent/keys')).json()) as { activeApiKeys: KeyView[] }
    const operator = own.activeApiKeys.find((k) => k.limitUsdc === null)!
    await expectBinding(await patch(agent.apiKey, operator.id, { limitUsdc: null }))
    // An unlimited key is out of its reach: limiting or revoking every one would lock the owner out.
    await expectBinding(await patch(agent.apiKey, operator.id, { limitUsdc: '0' }))
    await expectBinding(await patch(agent.apiKey, operator.id, { name: 'mine now' }))
    await expectBinding(await call(agent.apiKey, `/v1/agent/keys/${operator.id}`, { method: 'DELETE' }))
    const mints = [{ name: 'free' }, { name: 'big', limitUsdc: '1.000001' }]
    for (const json of mints) {
      await expectBinding(await call(agent.apiKey, '/v1/agent/keys', { method: 'POST', json }))
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })

  test('a key it mints is carved out of its own limit, and binds in turn; an unlimited key lifts it', async () => {
    const buyer = await fundedBuyer(stack)
    const agent = await mint(buyer, { name: 'agent', limitUsdc: '1' })
    const sibling = await mint(buyer, { name: 'sibling', limitUsdc: '2' })
    expect((await patch(agent.apiKey, agent.id, { limitUsdc: '0.8' })).status).toBe(200)
    expect((await patch(agent.apiKey, sibling.id, { limitUsdc: '1.5', name: 'lowered' })).status).toBe(200)
    const child = (await (
      await call(agent.apiKey, '/v1/agent/keys', {
        method: 'POST',
        json: { name: 'child', limitUsdc: '0.5' },
      })
    ).json()) as Minted
    expect(child.limitUsdc).toBe('0.500000')
    expect(await listed(buyer, agent.id)).toMatchObject({ limitUsdc: '0.300000' })
    await expectBinding(await patch(child.apiKey, child.id, { limitUsdc: '0.6' }))
    await expectBinding(await patch(child.apiKey, agent.id, { limitUsdc: null }))
    await expectBinding(
      await call(child.apiKey, '/v1/agent/keys', { method: 'POST', json: { name: 'x', limitUsdc: '0.6' } }),
    )
    // It may revoke a limited key; the operator's unlimited key keeps every power.
    expect((await call(agent.apiKey, `/v1/agent/keys/${sibling.id}`, { method: 'DELETE' })).status).toBe(200)
    expect((await patch(buyer.apiKey, agent.id, { limitUsdc: null })).status).toBe(200)
    expect(await listed(buyer, agent.id)).toMatchObject({ limitUsdc: null })
  })

  test('concurrent mints together never pass what the agent has left', async () => {
    const buyer = await fundedBuyer(stack)
    const agent = await mint(buyer, { name: 'agent', limitUsdc: '1' })
    const responses = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        call(agent.apiKey, '/v1/agent/keys', {
          method: 'POST',
          json: { name: `child-${i}`, limitUsdc: '0.3' },
        }),
      ),
    )
    expect(responses.map((r) => r.status).sort()).toEqual([201, 201, 201, 403, 403, 403])
    expect(await listed(buyer, agent.id)).toMatchObject({ limitUsdc: '0.100000' })
  })
})
