// Payouts through the real gateway onto a real local chain (anvil, the test USDC): a payout lands
// exactly once under retries of one Idempotency-Key and concurrent requests, the supplier's USDC on
// chain rises by exactly the amount, /v1/supplier/me moves payable -> pending -> paid out; a
// transfer the chain refuses ends failed and payable again; every refusal changes nothing.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import type { Address } from 'viem'
import { adminFetch, keyFetch } from '../helpers/accounts.ts'
import { startChain, type TestChain } from '../helpers/chain.ts'
import {
  type PayoutBody,
  payoutEnv,
  payoutWalletOn,
  postPayout,
  seedEarnings,
  supplierMe,
  transfersFrom,
  waitForPayout,
} from '../helpers/payouts.ts'
import { expectShapedRefusal } from '../helpers/refusals.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'

let chain: TestChain
let stack: TestStack
let payoutWallet: { key: `0x${string}`; address: Address }

beforeAll(async () => {
  chain = await startChain()
  payoutWallet = await payoutWalletOn(chain)
  stack = await startStack({ env: payoutEnv(chain, payoutWallet.key) })
})
afterAll(async () => {
  await stack.stop()
  await chain.stop()
})

/** Every key but the sender lock, which each pass of the sender takes and gives back. */
async function state(of: TestStack = stack) {
  const all = await snapshotKeys(of.store, of.keys.prefix)
  return Object.fromEntries(Object.entries(all).filter(([key]) => !key.includes(':payout:sender:')))
}

async function earningSupplier(micros: number): Promise<TestSupplier> {
  const supplier = await signInSupplier(stack)
  await seedEarnings(stack, supplier.supplierId, micros)
  return supplier
}

describe('a payout lands on chain exactly once', () => {
  test('retries and concurrent requests with one Idempotency-Key: one payout, one transfer, me moves', async () => {
    const supplier = await earningSupplier(5_000_000)
    const before = await chain.balanceOf(supplier.wallet as Address)
    const responses = await Promise.all(
      Array.from({ length: 8 }, () => postPayout(stack, supplier.apiKey, '3.250000', 'payout-once')),
    )
    const statuses = responses.map((r) => r.status).sort()
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 201])
    const bodies = (await Promise.all(responses.map((r) => r.json()))) as PayoutBody[]
    const id = bodies[0]!.id
    expect(new Set(bodies.map((b) => b.id))).toEqual(new Set([id]))
    expect(responses.filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(7)
    expect(bodies[0]).toMatchObject({ amountUsdc: '3.250000', wallet: supplier.wallet })
    const asked = await supplierMe(stack, supplier.apiKey)
    expect(asked).toMatchObject({ earnedUsdc: '5.000000', paidOutUsdc: '0.000000' })
    // pending until confirmed, whether or not the sender has sent it yet
    expect(asked.payoutPendingUsdc).toBe('3.250000')
    expect(asked.payableUsdc).toBe('1.750000')

    const done = await waitForPayout(stack, chain, supplier.apiKey, id, ['confirmed', 'failed'])
    expect(done.state).toBe('confirmed')
    expect(done.txHash).toMatch(/^0x[0-9a-f]{64}$/)
    // retried after it is confirmed: the same payout, nothing sent again
    const late = await postPayout(stack, supplier.apiKey, '3.250000', 'payout-once')
    expect(late.status).toBe(200)
    expect(((await late.json()) as PayoutBody).id).toBe(id)
    await chain.testClient.mine({ blocks: 3 })
    await Bun.sleep(200)
    const transfers = await transfersFrom(chain, payoutWallet.address, supplier.wallet as Address)
    expect(transfers).toEqual([
      { to: supplier.wallet as Address, value: 3_250_000n, tx: done.txHash as `0x${string}` },
    ])
    expect((await chain.balanceOf(supplier.wallet as Address)) - before).toBe(3_250_000n)
    expect(await supplierMe(stack, supplier.apiKey)).toMatchObject({
      earnedUsdc: '5.000000',
      paidOutUsdc: '3.250000',
      payoutPendingUsdc: '0.000000',
      payableUsdc: '1.750000',
    })
    const list = (await (await keyFetch(stack, supplier.apiKey, '/v1/supplier/payouts')).json()) as {
      data: PayoutBody[]
    }
    expect(list.data.map((p) => [p.id, p.state])).toEqual([[id, 'confirmed']])
  })

  test('concurrent requests under different keys: only what is payable is paid, each once', async () => {
    const supplier = await earningSupplier(5_000_000)
    const responses = await Promise.all(
      Array.from({ length: 9 }, (_, i) => postPayout(stack, supplier.apiKey, '1.000000', `many-${i}`)),
    )
    const created = responses.filter((r) => r.status === 201)
    expect(created).toHaveLength(5)
    for (const r of responses.filter((r) => r.status !== 201)) {
      expect(r.status).toBe(409)
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe('payout_exceeds_payable')
    }
    const ids = ((await Promise.all(created.map((r) => r.json()))) as PayoutBody[]).map((b) => b.id)
    const finished = await Promise.all(
      ids.map((id) => waitForPayout(stack, chain, supplier.apiKey, id, ['confirmed', 'failed'])),
    )
    expect(finished.map((p) => p.state)).toEqual([
      'confirmed',
      'confirmed',
      'confirmed',
      'confirmed',
      'confirmed',
    ])
    const transfers = await transfersFrom(chain, payoutWallet.address, supplier.wallet as Address)
    expect(transfers.map((t) => t.value)).toEqual([
      1_000_000n,
      1_000_000n,
      1_000_000n,
      1_000_000n,
      1_000_000n,
    ])
    expect(new Set(transfers.map((t) => t.tx))).toEqual(
      new Set(finished.map((p) => p.txHash as `0x${string}`)),
    )
    expect(await chain.balanceOf(supplier.wallet as Address)).toBe(5_000_000n)
    expect(await supplierMe(stack, supplier.apiKey)).toMatchObject({
      paidOutUsdc: '5.000000',
      payableUsdc: '0.000000',
    })
  })

  test('the operator sees payouts in flight; another supplier cannot read one (404)', async () => {
    const supplier = await earningSupplier(2_000_000)
    const other = await earningSupplier(2_000_000)
    const body = (await (await postPayout(stack, supplier.apiKey, '1.500000', 'seen')).json()) as PayoutBody
    const foreign = await keyFetch(stack, other.apiKey, `/v1/supplier/payouts/${body.id}`)
    expect(foreign.status).toBe(404)
    expect(((await foreign.json()) as { error: { code: string } }).error.code).toBe('payout_not_found')
    // two confirmations and no other transaction to mine a block: in flight until a block is mined
    const inFlight = (await (await adminFetch(stack, '/admin/v1/payouts')).json()) as {
      data: { id: string; supplierId: string; state: string }[]
    }
    const row = inFlight.data.find((p) => p.id === body.id)
    expect(row?.supplierId).toBe(supplier.supplierId)
    expect(['sending', 'pending']).toContain(row!.state)
    const done = await waitForPayout(stack, chain, supplier.apiKey, body.id, ['confirmed'])
    expect(done.state).toBe('confirmed')
    const after = (await (await adminFetch(stack, '/admin/v1/payouts')).json()) as { data: { id: string }[] }
    expect(after.data.map((p) => p.id)).not.toContain(body.id)
    expect((await adminFetch(stack, '/admin/v1/payouts?state=confirmed')).status).toBe(400)
  })
})

describe('refusals change nothing', () => {
  test('no or bad Idempotency-Key, bad amount, below the minimum, over payable, suspended', async () => {
    const supplier = await earningSupplier(3_000_000)
    const snapshot = await state()
    const refusals: [Response, number, string][] = [
      [await postPayout(stack, supplier.apiKey, '1.000000', null), 400, 'idempotency_key_required'],
      [await postPayout(stack, supplier.apiKey, '1.000000', 'a b'), 400, 'invalid_idempotency_key'],
      [await postPayout(stack, supplier.apiKey, '1.0000001', 'k'), 400, 'invalid_amount'],
      [await postPayout(stack, supplier.apiKey, '-1.000000', 'k'), 400, 'invalid_amount'],
      [await postPayout(stack, supplier.apiKey, '0.999999', 'k'), 400, 'payout_below_minimum'],
      [await postPayout(stack, supplier.apiKey, '3.000001', 'k'), 409, 'payout_exceeds_payable'],
    ]
    for (const [response, status, code] of refusals) {
      expect([response.status, ((await response.json()) as { error: { code: string } }).error.code]).toEqual([
        status,
        code,
      ])
    }
    expect(await state()).toEqual(snapshot)
    const suspend = await adminFetch(stack, `/admin/v1/suppliers/${supplier.supplierId}`, {
      method: 'PATCH',
      json: { status: 'suspended' },
    })
    expect(suspend.status).toBe(200)
    const suspended = await state()
    const refused = await postPayout(stack, supplier.apiKey, '1.000000', 'k')
    expect(refused.status).toBe(403)
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('supplier_suspended')
    expect(await state()).toEqual(suspended)
  })

  test('a gateway without a payout wallet answers 503 payouts_unavailable and changes nothing', async () => {
    const plain = await startStack()
    try {
      const supplier = await signInSupplier(plain)
      await seedEarnings(plain, supplier.supplierId, 3_000_000)
      const snapshot = await snapshotKeys(plain.store, plain.keys.prefix)
      const response = await postPayout(plain, supplier.apiKey, '1.000000', 'k')
      expect(response.status).toBe(503)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('payouts_unavailable')
      expect(await snapshotKeys(plain.store, plain.keys.prefix)).toEqual(snapshot)
    } finally {
      await plain.stop()
    }
  })
})

describe('hostile input on the payout routes', () => {
  test('random bodies, keys and queries from a supplier with nothing payable: shaped 4xx, nothing changed', async () => {
    const supplier = await signInSupplier(stack)
    const before = await state()
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.jsonValue({ maxDepth: 3 }),
          fc.record({ amountUsdc: fc.oneof(fc.string(), fc.double(), fc.integer()) }),
        ),
        fc.option(fc.stringMatching(/^[\x21-\x7E][\x20-\x7E]{0,300}$/)),
        async (body, key) => {
          const response = await keyFetch(stack, supplier.apiKey, '/v1/supplier/payouts', {
            method: 'POST',
            json: body,
            headers: key === null ? {} : { 'idempotency-key': key },
          })
          await expectShapedRefusal(response)
        },
      ),
      { numRuns: 150 },
    )
    await fc.assert(
      fc.asyncProperty(
        fc.string(),
        fc.string(), // '.' and '..' are path steps, not ids: fetch resolves them before sending
        fc.string({ minLength: 1, maxLength: 80 }).filter((id) => id !== '.' && id !== '..'),
        async (limit, before, id) => {
          const query = `?limit=${encodeURIComponent(limit)}&before=${encodeURIComponent(before)}`
          const list = await keyFetch(stack, supplier.apiKey, `/v1/supplier/payouts${query}`)
          if (list.status !== 200) await expectShapedRefusal(list)
          else expect(((await list.json()) as { data: unknown[] }).data).toEqual([])
          await expectShapedRefusal(
            await keyFetch(stack, supplier.apiKey, `/v1/supplier/payouts/${encodeURIComponent(id)}`),
          )
        },
      ),
      { numRuns: 100 },
    )
    expect(await state()).toEqual(before)
  })
})

describe('a transfer the chain refuses', () => {
  test('a payout wallet without USDC: the payout ends failed and the amount is payable again', async () => {
    const empty = await payoutWalletOn(chain, 0n)
    const dry = await startStack({ env: payoutEnv(chain, empty.key) })
    try {
      const supplier = await signInSupplier(dry)
      await seedEarnings(dry, supplier.supplierId, 2_000_000)
      const body = (await (await postPayout(dry, supplier.apiKey, '2.000000', 'dry')).json()) as PayoutBody
      const done = await waitForPayout(dry, chain, supplier.apiKey, body.id, ['confirmed', 'failed'])
      expect(done.state).toBe('failed')
      expect(done.error).toContain('revert')
      expect(await supplierMe(dry, supplier.apiKey)).toMatchObject({
        payoutPendingUsdc: '0.000000',
        paidOutUsdc: '0.000000',
        payableUsdc: '2.000000',
      })
      expect(await transfersFrom(chain, empty.address)).toEqual([])
      expect(await chain.balanceOf(supplier.wallet as Address)).toBe(0n)
    } finally {
      await dry.stop()
    }
  })
})
