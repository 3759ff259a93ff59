// The payout scripts directly against a real Redis: payout-create (every refusal changes nothing,
// idempotency, payable summed over every offer), payout-move (each step, repeats, illegal moves,
// a reorg, the fencing token), payout-lock, offer-put's bound on a supplier's offers, and many concurrent
// creates against one payable: never more created than payable.
import { describe, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import fc from 'fast-check'
import libKeys from '../../lua/lib/keys.lua' with { type: 'text' }
import { MAX_SUPPLIER_OFFERS } from '../../src/market/offer-limits.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { PayoutStore } from '../../src/payouts/store.ts'
import { PayoutMoveCode } from '../../src/redis/result-codes.ts'
import { SupplierStore } from '../../src/suppliers/store.ts'
import { WebhookStore } from '../../src/webhooks/endpoints.ts'
import {
  freshMarketPerTest,
  type MarketFixture,
  seedSupplier as seedFixtureSupplier,
} from '../helpers/market.ts'
import { snapshotKeys } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let fx: MarketFixture
let payouts: PayoutStore
freshMarketPerTest((fresh) => {
  fx = fresh
  payouts = new PayoutStore(fx.store, fx.keys)
})

const MIN = 1_000_000
const WALLET = '0x1111111111111111111111111111111111111111'

const seedSupplier = (status = 'active') => seedFixtureSupplier(fx, status)

/** A supplier offer that has earned `earned` micro-USDC (written as clear would leave it). */
async function earning(supplierId: string, earned: number): Promise<string> {
  const digest = randomUUID()
  const offer = await fx.offers.create({
    upstreamBaseUrl: 'http://127.0.0.1:1',
    upstreamApiKey: `k-${digest}`,
    askCents: 40,
    capacity: 5_000_000 as MicroDiem,
    supplierId,
    upstreamKeyDigest: digest,
  })
  await fx.store.hset(fx.keys.offer(offer.id), 'earned', earned)
  return offer.id
}

const money = async (id: string) => {
  const s = await new SupplierStore(fx.store, fx.keys).require(id)
  return {
    earned: s.earned,
    paidOut: s.paidOut,
    pending: s.pending,
    payable: s.earned - s.paidOut - s.pending,
  }
}

async function holdLock(): Promise<string> {
  const token = randomUUID()
  expect(await payouts.lock('acquire', WALLET, token, 60_000)).toBe(true)
  return token
}

describe('lua key names', () => {
  test('the payout names in lib/keys are those of src/redis/keys.ts', async () => {
    const script = `${libKeys}\nuse_keyspace(KEYS[1])\nreturn { k_payout('P'), k_supplier_payouts('S'), k_payout_key('S', 'D'), k_payout_lock('W'), k_payout_next_nonce('W'), K_PAYOUTS_OPEN }`
    expect(await fx.store.eval(script, 1, fx.keys.base)).toEqual([
      fx.keys.payout('P'),
      fx.keys.supplierPayouts('S'),
      fx.keys.payoutKey('S', 'D'),
      fx.keys.payoutSenderLock('W'),
      fx.keys.payoutNextNonce('W'),
      fx.keys.payoutsOpen,
    ])
  })
})

describe('payout-create', () => {
  test('moves the amount from payable to pending and opens the payout in sending', async () => {
    const id = await seedSupplier()
    await earning(id, 3_000_000)
    const deleted = await earning(id, 2_000_000)
    await fx.offers.remove(deleted, id)
    expect(await money(id)).toEqual({ earned: 5_000_000, paidOut: 0, pending: 0, payable: 5_000_000 })
    const { payout, created } = await payouts.create(id, 4_500_000, 'key-1', MIN)
    expect(created).toBe(true)
    expect(payout).toMatchObject({ supplierId: id, amount: 4_500_000, state: 'sending', rawTx: null })
    expect(payout.wallet).toBe((await fx.store.hget(fx.keys.supplier(id), 'wallet'))!)
    expect(await money(id)).toEqual({ earned: 5_000_000, paidOut: 0, pending: 4_500_000, payable: 500_000 })
    expect(await fx.store.zrange(fx.keys.payoutsOpen, 0, -1)).toEqual([payout.id])
    expect(await fx.store.zrange(fx.keys.supplierPayouts(id), 0, -1)).toEqual([payout.id])
  })

  test('the same Idempotency-Key answers the same payout; with another amount it is refused', async () => {
    const id = await seedSupplier()
    await earning(id, 10_000_000)
    const first = await payouts.create(id, 2_000_000, 'same', MIN)
    const again = await payouts.create(id, 2_000_000, 'same', MIN)
    expect(again).toEqual({ payout: first.payout, created: false })
    const before = await snapshotKeys(fx.store, fx.keys.prefix)
    await expect(payouts.create(id, 3_000_000, 'same', MIN)).rejects.toMatchObject({
      status: 409,
      code: 'idempotency_key_reused',
    })
    expect(await snapshotKeys(fx.store, fx.keys.prefix)).toEqual(before)
    expect((await money(id)).pending).toBe(2_000_000)
    // another supplier's key of the same text is its own
    const other = await seedSupplier()
    await earning(other, 10_000_000)
    expect((await payouts.create(other, 3_000_000, 'same', MIN)).created).toBe(true)
  })

  test('unknown, suspended, below the minimum, above payable: refused with nothing changed', async () => {
    const id = await seedSupplier()
    await earning(id, 2_000_000)
    const suspended = await seedSupplier()
    await earning(suspended, 2_000_000)
    await fx.store.hset(fx.keys.supplier(suspended), 'status', 'suspended')
    await payouts.create(id, 1_500_000, 'k0', MIN)
    const before = await snapshotKeys(fx.store, fx.keys.prefix)
    await expect(payouts.create('spl_nobody', 1_000_000, 'k1', MIN)).rejects.toMatchObject({ status: 404 })
    await expect(payouts.create(suspended, 1_000_000, 'k1', MIN)).rejects.toMatchObject({
      status: 403,
      code: 'supplier_suspended',
    })
    await expect(payouts.create(id, 999_999, 'k1', MIN)).rejects.toMatchObject({
      status: 400,
      code: 'payout_below_minimum',
    })
    await expect(payouts.create(id, 1_000_000, 'k1', MIN)).rejects.toMatchObject({
      status: 409,
      code: 'payout_exceeds_payable',
      extra: { payableUsdc: '0.500000' },
    })
    expect(await snapshotKeys(fx.store, fx.keys.prefix)).toEqual(before)
  })

  test('many concurrent creates against one payable never create more than payable', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1_000_000, max: 50_000_000 }),
        fc.array(fc.integer({ min: 1_000_000, max: 8_000_000 }), { minLength: 1, maxLength: 60 }),
        async (earned, amounts) => {
          const id = await seedSupplier()
          await earning(id, earned)
          const results = await Promise.allSettled(
            amounts.map((amount, i) => payouts.create(id, amount, `key-${i}`, MIN)),
          )
          const made = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value.payout.amount] : []))
          for (const r of results) {
            if (r.status === 'rejected') expect(r.reason).toMatchObject({ code: 'payout_exceeds_payable' })
          }
          const sum = made.reduce((a, b) => a + b, 0)
          expect(sum).toBeLessThanOrEqual(earned)
          const m = await money(id)
          expect(m.pending).toBe(sum)
          expect(m.payable).toBeGreaterThanOrEqual(0)
          // every refusal was right: its amount was above what was payable at some point, and the
          // smallest refused amount is above what is payable at the end
          const refused = amounts.filter((_, i) => results[i]!.status === 'rejected')
          if (refused.length) expect(Math.min(...refused)).toBeGreaterThan(m.payable)
        },
      ),
      { numRuns: 25 },
    )
  })
})

describe('payout-move', () => {
  test('signed, included, confirmed: pending becomes paid out; each step again changes nothing', async () => {
    const id = await seedSupplier()
    await earning(id, 5_000_000)
    const { payout } = await payouts.create(id, 2_000_000, 'k', MIN)
    const token = await holdLock()
    const signed = {
      step: 'signed',
      from: WALLET,
      nonce: 7,
      txHash: '0xabc',
      rawTx: '0xraw',
      signedBlock: 5n,
    } as const
    expect(await payouts.move(payout.id, WALLET, token, signed)).toBe(PayoutMoveCode.Moved)
    expect(await payouts.move(payout.id, WALLET, token, signed)).toBe(PayoutMoveCode.AlreadySo)
    expect(await payouts.nextNonce(WALLET)).toBe(8)
    expect(await payouts.move(payout.id, WALLET, token, { ...signed, txHash: '0xother' })).toBe(
      PayoutMoveCode.Illegal,
    )
    // not yet included: it cannot be confirmed
    expect(await payouts.move(payout.id, WALLET, token, { step: 'confirmed', blockNumber: 9n })).toBe(
      PayoutMoveCode.Illegal,
    )
    expect(
      await payouts.move(payout.id, WALLET, token, { step: 'included', txHash: '0xnope', blockNumber: 9n }),
    ).toBe(PayoutMoveCode.Illegal)
    const included = { step: 'included', txHash: '0xabc', blockNumber: 9n } as const
    expect(await payouts.move(payout.id, WALLET, token, included)).toBe(PayoutMoveCode.Moved)
    expect(await payouts.move(payout.id, WALLET, token, included)).toBe(PayoutMoveCode.AlreadySo)
    expect(await payouts.get(payout.id)).toMatchObject({
      state: 'pending',
      blockNumber: 9,
      nonce: 7,
      from: WALLET,
    })
    expect(await money(id)).toMatchObject({ pending: 2_000_000, paidOut: 0 })
    const confirmed = { step: 'confirmed', blockNumber: 9n } as const
    expect(await payouts.move(payout.id, WALLET, token, confirmed)).toBe(PayoutMoveCode.Moved)
    expect(await payouts.move(payout.id, WALLET, token, confirmed)).toBe(PayoutMoveCode.AlreadySo)
    expect(await money(id)).toEqual({ earned: 5_000_000, paidOut: 2_000_000, pending: 0, payable: 3_000_000 })
    expect(await payouts.move(payout.id, WALLET, token, { step: 'failed', error: 'x' })).toBe(
      PayoutMoveCode.Illegal,
    )
    expect(await money(id)).toMatchObject({ paidOut: 2_000_000, pending: 0 })
    expect(await fx.store.zcard(fx.keys.payoutsOpen)).toBe(0)
  })

  test('a reorg: included again in another block, or dropped back to sending with its bytes kept', async () => {
    const id = await seedSupplier()
    await earning(id, 5_000_000)
    const { payout } = await payouts.create(id, 2_000_000, 'r', MIN)
    const token = await holdLock()
    await payouts.move(payout.id, WALLET, token, {
      step: 'signed',
      from: WALLET,
      nonce: 4,
      txHash: '0xr',
      rawTx: '0xbytes',
      signedBlock: 5n,
    })
    // dropped only from pending, and only for its own transaction
    const dropped = { step: 'dropped', txHash: '0xr' } as const
    expect(await payouts.move(payout.id, WALLET, token, dropped)).toBe(PayoutMoveCode.AlreadySo)
    await payouts.move(payout.id, WALLET, token, { step: 'included', txHash: '0xr', blockNumber: 9n })
    expect(
      await payouts.move(payout.id, WALLET, token, { step: 'included', txHash: '0xr', blockNumber: 11n }),
    ).toBe(PayoutMoveCode.Moved)
    expect(await payouts.get(payout.id)).toMatchObject({ state: 'pending', blockNumber: 11 })
    expect(await payouts.move(payout.id, WALLET, token, { step: 'dropped', txHash: '0xother' })).toBe(
      PayoutMoveCode.Illegal,
    )
    expect(await payouts.move(payout.id, WALLET, token, dropped)).toBe(PayoutMoveCode.Moved)
    expect(await payouts.move(payout.id, WALLET, token, dropped)).toBe(PayoutMoveCode.AlreadySo)
    expect(await payouts.get(payout.id)).toMatchObject({
      state: 'sending',
      blockNumber: null,
      txHash: '0xr',
      rawTx: '0xbytes',
      nonce: 4,
    })
    // the money does not move while the transfer is out of the chain
    expect(await money(id)).toMatchObject({ pending: 2_000_000, paidOut: 0, payable: 3_000_000 })
    expect(await fx.store.zscore(fx.keys.payoutsOpen, payout.id)).not.toBeNull()
    await payouts.move(payout.id, WALLET, token, { step: 'included', txHash: '0xr', blockNumber: 12n })
    await payouts.move(payout.id, WALLET, token, { step: 'confirmed', blockNumber: 12n })
    expect(await payouts.move(payout.id, WALLET, token, dropped)).toBe(PayoutMoveCode.Illegal)
    expect(await money(id)).toEqual({ earned: 5_000_000, paidOut: 2_000_000, pending: 0, payable: 3_000_000 })
  })

  test('failed from sending or pending makes the amount payable again, once', async () => {
    const id = await seedSupplier()
    await earning(id, 5_000_000)
    const token = await holdLock()
    const a = (await payouts.create(id, 2_000_000, 'a', MIN)).payout
    const b = (await payouts.create(id, 1_000_000, 'b', MIN)).payout
    await payouts.move(b.id, WALLET, token, {
      step: 'signed',
      from: WALLET,
      nonce: 1,
      txHash: '0xb',
      rawTx: '0x',
      signedBlock: 5n,
    })
    await payouts.move(b.id, WALLET, token, { step: 'included', txHash: '0xb', blockNumber: 3n })
    expect(await money(id)).toMatchObject({ pending: 3_000_000, payable: 2_000_000 })
    for (const p of [a, b]) {
      expect(await payouts.move(p.id, WALLET, token, { step: 'failed', error: 'reverted' })).toBe(
        PayoutMoveCode.Moved,
      )
      expect(await payouts.move(p.id, WALLET, token, { step: 'failed', error: 'reverted' })).toBe(
        PayoutMoveCode.AlreadySo,
      )
    }
    expect(await money(id)).toEqual({ earned: 5_000_000, paidOut: 0, pending: 0, payable: 5_000_000 })
    expect(await payouts.get(a.id)).toMatchObject({ state: 'failed', error: 'reverted' })
    // a failed payout never signs nor confirms
    expect(
      await payouts.move(a.id, WALLET, token, {
        step: 'signed',
        from: WALLET,
        nonce: 2,
        txHash: '0xa',
        rawTx: '0x',
        signedBlock: 5n,
      }),
    ).toBe(PayoutMoveCode.Illegal)
    expect(await payouts.move(b.id, WALLET, token, { step: 'confirmed', blockNumber: 3n })).toBe(
      PayoutMoveCode.Illegal,
    )
    expect(await payouts.move('po_nobody', WALLET, token, { step: 'failed', error: 'x' })).toBe(
      PayoutMoveCode.UnknownPayout,
    )
  })

  test("a signed payout moves only under its signing wallet's lock; nothing is signed for another wallet", async () => {
    const id = await seedSupplier()
    await earning(id, 5_000_000)
    const { payout } = await payouts.create(id, 2_000_000, 'signer', MIN)
    const token = await holdLock()
    // the signing wallet, recorded in its checksum case; its lock is named in lower case
    const signer = '0xAbCdEf0000000000000000000000000000000001'
    const signerToken = randomUUID()
    expect(await payouts.lock('acquire', signer, signerToken, 60_000)).toBe(true)
    const signed = {
      step: 'signed',
      from: signer,
      nonce: 2,
      txHash: '0xs1',
      rawTx: '0xb',
      signedBlock: 4n,
    } as const
    expect(await payouts.move(payout.id, WALLET, token, signed)).toBe(PayoutMoveCode.OtherSigner)
    expect(await payouts.get(payout.id)).toMatchObject({ state: 'sending', txHash: null, from: null })
    expect(await payouts.nextNonce(WALLET)).toBe(0)
    expect(await payouts.move(payout.id, signer, signerToken, signed)).toBe(PayoutMoveCode.Moved)
    // another wallet's lock moves none of it
    const steps = [
      { step: 'bumped', txHash: '0xs2', rawTx: '0xb2' },
      { step: 'included', txHash: '0xs1', blockNumber: 6n },
      { step: 'failed', error: 'its nonce was used by another transaction' },
    ] as const
    for (const step of steps) {
      expect(await payouts.move(payout.id, WALLET, token, step)).toBe(PayoutMoveCode.OtherSigner)
    }
    expect(await payouts.get(payout.id)).toMatchObject({ state: 'sending', hashes: ['0xs1'] })
    expect(await money(id)).toMatchObject({ pending: 2_000_000, paidOut: 0 })
    // the signing wallet's lock does
    expect(await payouts.move(payout.id, signer, signerToken, steps[1])).toBe(PayoutMoveCode.Moved)
    expect(await payouts.move(payout.id, signer, signerToken, { step: 'confirmed', blockNumber: 6n })).toBe(
      PayoutMoveCode.Moved,
    )
    expect(await money(id)).toMatchObject({ pending: 0, paidOut: 2_000_000 })
  })

  test('bumped: another hash at the same nonce is kept beside the first; any of them may be included', async () => {
    const id = await seedSupplier()
    await earning(id, 5_000_000)
    const { payout } = await payouts.create(id, 2_000_000, 'bump', MIN)
    const token = await holdLock()
    const bumped = { step: 'bumped', txHash: '0xb2', rawTx: '0xbytes2' } as const
    // nothing signed yet: nothing to bump
    expect(await payouts.move(payout.id, WALLET, token, bumped)).toBe(PayoutMoveCode.Illegal)
    const signed = {
      step: 'signed',
      from: WALLET,
      nonce: 3,
      txHash: '0xb1',
      rawTx: '0xbytes1',
      signedBlock: 8n,
    } as const
    await payouts.move(payout.id, WALLET, token, signed)
    expect(await payouts.move(payout.id, WALLET, token, bumped)).toBe(PayoutMoveCode.Moved)
    expect(await payouts.move(payout.id, WALLET, token, bumped)).toBe(PayoutMoveCode.AlreadySo)
    expect(await payouts.move(payout.id, WALLET, token, signed)).toBe(PayoutMoveCode.AlreadySo)
    expect(await payouts.get(payout.id)).toMatchObject({
      state: 'sending',
      nonce: 3,
      signedBlock: 8,
      txHash: '0xb2',
      rawTx: '0xbytes2',
      hashes: ['0xb1', '0xb2'],
    })
    expect(
      await payouts.move(payout.id, WALLET, token, { step: 'included', txHash: '0xb3', blockNumber: 9n }),
    ).toBe(PayoutMoveCode.Illegal)
    // the first one mined: it becomes the payout's transaction
    expect(
      await payouts.move(payout.id, WALLET, token, { step: 'included', txHash: '0xb1', blockNumber: 9n }),
    ).toBe(PayoutMoveCode.Moved)
    expect(await payouts.get(payout.id)).toMatchObject({ state: 'pending', txHash: '0xb1', blockNumber: 9 })
    expect(await payouts.move(payout.id, WALLET, token, { ...bumped, txHash: '0xb4' })).toBe(
      PayoutMoveCode.Illegal,
    )
    expect(await money(id)).toMatchObject({ pending: 2_000_000, paidOut: 0, payable: 3_000_000 })
  })

  test('withheld: a suspended supplier unsigned payout is payable again, once; a signed one never', async () => {
    const id = await seedSupplier()
    await earning(id, 5_000_000)
    const token = await holdLock()
    const unsigned = (await payouts.create(id, 2_000_000, 'w1', MIN)).payout
    const signed = (await payouts.create(id, 1_000_000, 'w2', MIN)).payout
    const signing = {
      step: 'signed',
      from: WALLET,
      nonce: 1,
      txHash: '0xw',
      rawTx: '0x',
      signedBlock: 5n,
    } as const
    await payouts.move(signed.id, WALLET, token, signing)
    const withheld = { step: 'withheld', error: 'the supplier is suspended' } as const
    // an active supplier's payout is not withheld
    const before = await snapshotKeys(fx.store, fx.keys.prefix)
    expect(await payouts.move(unsigned.id, WALLET, token, withheld)).toBe(PayoutMoveCode.Suspension)
    expect(await snapshotKeys(fx.store, fx.keys.prefix)).toEqual(before)
    await fx.store.hset(fx.keys.supplier(id), 'status', 'suspended')
    // a suspended supplier's payout is not signed
    const other = (await payouts.get(unsigned.id))!
    expect(await payouts.move(other.id, WALLET, token, { ...signing, txHash: '0xx' })).toBe(
      PayoutMoveCode.Suspension,
    )
    expect(await payouts.move(unsigned.id, WALLET, token, withheld)).toBe(PayoutMoveCode.Moved)
    expect(await payouts.move(unsigned.id, WALLET, token, withheld)).toBe(PayoutMoveCode.AlreadySo)
    expect(await payouts.get(unsigned.id)).toMatchObject({
      state: 'failed',
      error: 'the supplier is suspended',
      txHash: null,
    })
    expect(await payouts.move(signed.id, WALLET, token, withheld)).toBe(PayoutMoveCode.Illegal)
    expect(await payouts.get(signed.id)).toMatchObject({ state: 'sending', txHash: '0xw', rawTx: '0x' })
    expect(await money(id)).toEqual({ earned: 5_000_000, paidOut: 0, pending: 1_000_000, payable: 4_000_000 })
    expect(await fx.store.zscore(fx.keys.payoutsOpen, unsigned.id)).toBeNull()
  })

  test('without the lock, or with a stale token, nothing moves', async () => {
    const id = await seedSupplier()
    await earning(id, 5_000_000)
    const { payout } = await payouts.create(id, 2_000_000, 'k', MIN)
    const before = await snapshotKeys(fx.store, fx.keys.prefix)
    const step = {
      step: 'signed',
      from: WALLET,
      nonce: 1,
      txHash: '0x1',
      rawTx: '0x',
      signedBlock: 5n,
    } as const
    expect(await payouts.move(payout.id, WALLET, 'no-lock', step)).toBe(PayoutMoveCode.NotHolder)
    const stale = randomUUID()
    expect(await payouts.lock('acquire', WALLET, stale, 30)).toBe(true)
    await until(async () => (await fx.store.exists(fx.keys.payoutSenderLock(WALLET.toLowerCase()))) === 0)
    const fresh = await holdLock()
    const afterLock = await snapshotKeys(fx.store, fx.keys.prefix)
    expect(await payouts.move(payout.id, WALLET, stale, step)).toBe(PayoutMoveCode.NotHolder)
    expect(await payouts.move(payout.id, WALLET, stale, { step: 'failed', error: 'x' })).toBe(
      PayoutMoveCode.NotHolder,
    )
    expect(await snapshotKeys(fx.store, fx.keys.prefix)).toEqual(afterLock)
    expect(Object.keys(afterLock).filter((k) => !(k in before))).toEqual([
      fx.keys.payoutSenderLock(WALLET.toLowerCase()),
    ])
    expect(await payouts.move(payout.id, WALLET, fresh, step)).toBe(PayoutMoveCode.Moved)
  })
})

describe('payout-lock', () => {
  test('one holder; renew and release by its token only', async () => {
    const a = randomUUID()
    const b = randomUUID()
    expect(await payouts.lock('acquire', WALLET, a, 60_000)).toBe(true)
    expect(await payouts.lock('acquire', WALLET, b, 60_000)).toBe(false)
    expect(await payouts.lock('renew', WALLET, b, 60_000)).toBe(false)
    expect(await payouts.lock('release', WALLET, b, 0)).toBe(false)
    expect(await payouts.lock('renew', WALLET, a, 60_000)).toBe(true)
    expect(await payouts.lock('release', WALLET, a, 0)).toBe(true)
    expect(await payouts.lock('acquire', WALLET, b, 60_000)).toBe(true)
    expect(await fx.store.get(fx.keys.payoutSenderLock(WALLET.toLowerCase()))).toBe(b)
  })
})

describe('offer-put bounds a supplier offers', () => {
  test(`at ${MAX_SUPPLIER_OFFERS} standing offers the next is a 409 offer_limit; deleting one frees a place`, async () => {
    const id = await seedSupplier()
    const ids: string[] = []
    for (let i = 0; i < MAX_SUPPLIER_OFFERS; i++) ids.push(await earning(id, 0))
    const before = await snapshotKeys(fx.store, fx.keys.prefix)
    await expect(earning(id, 0)).rejects.toMatchObject({ status: 409, code: 'offer_limit' })
    expect(await snapshotKeys(fx.store, fx.keys.prefix)).toEqual(before)
    await fx.offers.remove(ids[0]!, id)
    expect(await earning(id, 0)).toBeString()
  })
})

describe('payout events', () => {
  test('confirmed and failed write their event once, in the step that takes them; refused steps none', async () => {
    const id = await seedSupplier()
    await earning(id, 5_000_000)
    const store = new WebhookStore(fx.store, fx.keys, randomBytes(32), { allowLoopback: true })
    await store.create(`supplier:${id}`, {
      url: 'http://127.0.0.1:9/',
      events: ['payout.confirmed', 'payout.failed'],
    })
    const token = await holdLock()
    const events = async () =>
      (await fx.store.xrange(fx.keys.webhookEvents(`supplier:${id}`), '-', '+')).map(([, f]) => [
        f[1],
        JSON.parse(f[5] as string).payoutId,
        JSON.parse(f[5] as string).amountUsdc,
      ])
    const sign = (txHash: string) =>
      ({ step: 'signed', from: WALLET, nonce: 1, txHash, rawTx: '0xraw', signedBlock: 5n }) as const

    const { payout: a } = await payouts.create(id, 2_000_000, 'a', MIN)
    await payouts.move(a.id, WALLET, token, sign('0xa'))
    await payouts.move(a.id, WALLET, token, { step: 'included', txHash: '0xa', blockNumber: 9n })
    expect(await events()).toEqual([])
    for (let i = 0; i < 2; i++)
      await payouts.move(a.id, WALLET, token, { step: 'confirmed', blockNumber: 9n })
    expect(await payouts.move(a.id, WALLET, token, { step: 'failed', error: 'x' })).toBe(
      PayoutMoveCode.Illegal,
    )

    const { payout: b } = await payouts.create(id, 1_000_000, 'b', MIN)
    await payouts.move(b.id, WALLET, token, sign('0xb'))
    for (let i = 0; i < 2; i++) await payouts.move(b.id, WALLET, token, { step: 'failed', error: 'reverted' })
    expect(await events()).toEqual([
      ['payout.confirmed', a.id, '2.000000'],
      ['payout.failed', b.id, '1.000000'],
    ])
  })
})
