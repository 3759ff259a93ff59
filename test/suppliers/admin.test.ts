// The operator's side of suppliers over real HTTP (and the CLI as a real process): the list with
// earnings, suspension taking offers off the ladder at once and reinstatement bringing them back,
// and a supplier's offer's upstream that no operator change moves.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { runCli } from '../helpers/cli.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'

let stack: TestStack
let supplier: TestSupplier
let buyer: TestAccount
let offerId: string

const chat = () =>
  keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 },
  })

interface AdminSupplier {
  supplierId: string
  wallet: string
  status: string
  offerCount: number
  earnedUsdc: string
  paidOutUsdc: string
  payoutPendingUsdc: string
  payableUsdc: string
}

async function listed(id: string): Promise<AdminSupplier> {
  const list = (await (await adminFetch(stack, '/admin/v1/suppliers')).json()) as { data: AdminSupplier[] }
  return list.data.find((s) => s.supplierId === id)!
}

const setStatus = (id: string, status: string) =>
  adminFetch(stack, `/admin/v1/suppliers/${id}`, { method: 'PATCH', json: { status } })

beforeAll(async () => {
  stack = await startStack()
  supplier = await signInSupplier(stack)
  const posted = await keyFetch(stack, supplier.apiKey, '/v1/supplier/offers', {
    method: 'POST',
    json: { upstreamApiKey: `venice-${randomUUID()}`, askCents: 40, capacityDiem: '50' },
  })
  offerId = ((await posted.json()) as { id: string }).id
  buyer = await fundedBuyer(stack, '5')
})
afterAll(() => stack.stop())

describe('operator: suppliers', () => {
  test('the list shows wallet, status, offer count and earnings matching the supplier’s own view', async () => {
    const charged = await chat()
    expect(charged.status).toBe(200)
    const row = await listed(supplier.supplierId)
    const own = (await (await keyFetch(stack, supplier.apiKey, '/v1/supplier/me')).json()) as Record<
      string,
      string
    >
    expect(row).toMatchObject({
      wallet: supplier.wallet,
      status: 'active',
      offerCount: 1,
      earnedUsdc: own.earnedUsdc,
      paidOutUsdc: '0.000000',
      payoutPendingUsdc: '0.000000',
      payableUsdc: own.earnedUsdc,
    })
    expect(row.earnedUsdc).toBe(charged.headers.get('x-svc-cost-usdc')!)
    const one = await adminFetch(stack, `/admin/v1/suppliers/${supplier.supplierId}`)
    expect(await one.json()).toEqual(row)
  })

  test('suspended: offers leave the ladder at once, no posting or activating; reinstated: back', async () => {
    const suspended = await setStatus(supplier.supplierId, 'suspended')
    expect(suspended.status).toBe(200)
    expect(((await suspended.json()) as AdminSupplier).status).toBe('suspended')
    expect(await stack.store.zscore(stack.keys.ladder, offerId)).toBeNull()
    const refusedChat = await chat()
    expect(refusedChat.status).toBe(503)
    await refusedChat.arrayBuffer()

    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const post = await keyFetch(stack, supplier.apiKey, '/v1/supplier/offers', {
      method: 'POST',
      json: { upstreamApiKey: `venice-${randomUUID()}`, askCents: 40, capacityDiem: '5' },
    })
    expect(post.status).toBe(403)
    expect(((await post.json()) as { error: { code: string } }).error.code).toBe('supplier_suspended')
    const activate = await keyFetch(stack, supplier.apiKey, `/v1/supplier/offers/${offerId}`, {
      method: 'PATCH',
      json: { status: 'active' },
    })
    expect(activate.status).toBe(403)
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
    // it still sees its own account
    const me = (await (await keyFetch(stack, supplier.apiKey, '/v1/supplier/me')).json()) as {
      status: string
    }
    expect(me.status).toBe('suspended')

    expect((await setStatus(supplier.supplierId, 'active')).status).toBe(200)
    expect(await stack.store.zscore(stack.keys.ladder, offerId)).not.toBeNull()
    expect((await chat()).status).toBe(200)
  })

  test("the operator changes a supplier's offer but not its upstream: a 409 that changes nothing", async () => {
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    for (const json of [
      { upstreamApiKey: `venice-${randomUUID()}` },
      { upstreamBaseUrl: 'http://127.0.0.1:9/v1' },
      { upstreamApiKey: `venice-${randomUUID()}`, askCents: 45 },
    ]) {
      const change = await adminFetch(stack, `/admin/v1/offers/${offerId}`, { method: 'PATCH', json })
      expect(change.status).toBe(409)
      expect(((await change.json()) as { error: { code: string } }).error.code).toBe(
        'supplier_offer_upstream',
      )
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
    // Its market fields are the operator's to change.
    const priced = await adminFetch(stack, `/admin/v1/offers/${offerId}`, {
      method: 'PATCH',
      json: { askCents: 40 },
    })
    expect(priced.status).toBe(200)
  })

  test('bad status, unknown supplier and no token are refused', async () => {
    expect((await setStatus(supplier.supplierId, 'deleted')).status).toBe(400)
    expect((await setStatus('spl_000000000000000000000000', 'active')).status).toBe(404)
    const noToken = await fetch(`${stack.url}/admin/v1/suppliers`)
    expect(noToken.status).toBe(401)
    const supplierKey = await keyFetch(stack, supplier.apiKey, '/admin/v1/suppliers')
    expect(supplierKey.status).toBe(401)
  })

  test('the CLI lists, suspends and reinstates the same way', async () => {
    const env = {
      REDIS_URL: stack.config.redisUrl,
      SVC_REDIS_PREFIX: stack.config.redisPrefix,
    }
    const cli = (...args: string[]) => runCli(['supplier', ...args], env)
    const list = await cli('list')
    expect(list.code).toBe(0)
    expect((JSON.parse(list.stdout) as { data: AdminSupplier[] }).data.map((s) => s.supplierId)).toContain(
      supplier.supplierId,
    )
    const suspend = await cli('suspend', supplier.supplierId)
    expect(suspend.code).toBe(0)
    expect(JSON.parse(suspend.stdout).status).toBe('suspended')
    expect(await stack.store.zscore(stack.keys.ladder, offerId)).toBeNull()
    expect(JSON.parse((await cli('reinstate', supplier.supplierId)).stdout).status).toBe('active')
    expect(await stack.store.zscore(stack.keys.ladder, offerId)).not.toBeNull()
    expect((await cli('show', 'spl_nobody')).code).toBe(1)
    expect((await cli('frobnicate')).code).toBe(2)
  })
})
