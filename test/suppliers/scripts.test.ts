// The supplier side of the market scripts, directly against a real Redis: offer-put's owner,
// digest claim and suspension rules, supplier-status moving offers off and back on the ladder,
// clear appending fills (on time, late after a reap, never twice), and the audit's supplier checks.
import { describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import libKeys from '../../lua/lib/keys.lua' with { type: 'text' }
import { auditAll } from '../../src/cli/audit.ts'
import { reapExpired } from '../../src/market/leases.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { SupplierStore } from '../../src/suppliers/store.ts'
import {
  admitFor,
  admitted,
  clearFor,
  freshMarketPerTest,
  type MarketFixture,
  postOffer,
  seedAccount,
  seedSupplier as seedFixtureSupplier,
} from '../helpers/market.ts'
import { keysUnder } from '../helpers/stack.ts'
import { untilRedisPasses } from '../helpers/wait.ts'

let fx: MarketFixture
freshMarketPerTest((fresh) => {
  fx = fresh
})

const seedSupplier = (status = 'active') => seedFixtureSupplier(fx, status)

function supplierOffer(supplierId: string, askCents = 40, digest: string = randomUUID()) {
  return fx.offers.create({
    upstreamBaseUrl: 'http://127.0.0.1:1',
    upstreamApiKey: `k-${digest}`,
    askCents,
    capacity: 5_000_000 as MicroDiem,
    supplierId,
    upstreamKeyDigest: digest,
  })
}

const onLadder = async (id: string) => (await fx.store.zscore(fx.keys.ladder, id)) !== null
const fills = (id: string) => fx.store.xrange(fx.keys.supplierFills(id), '-', '+')
const field = (entry: [string, string[]], name: string) => entry[1][entry[1].indexOf(name) + 1]

describe('lua key names', () => {
  test('the supplier names in lib/keys are those of src/redis/keys.ts', async () => {
    const script = `${libKeys}\nuse_keyspace(KEYS[1])\nreturn { k_supplier('S'), k_supplier_offers('S'), k_supplier_keys('S'), k_supplier_fills('S'), k_supkey('D'), k_siwe_nonce('N'), K_SUPPLIERS, K_SUPPLIER_WALLETS, K_UPSTREAM_KEYS }`
    expect(await fx.store.eval(script, 1, fx.keys.base)).toEqual([
      fx.keys.supplier('S'),
      fx.keys.supplierOffers('S'),
      fx.keys.supplierKeys('S'),
      fx.keys.supplierFills('S'),
      fx.keys.supplierKey('D'),
      fx.keys.siweNonce('N'),
      fx.keys.suppliers,
      fx.keys.supplierWallets,
      fx.keys.upstreamKeys,
    ])
  })
})

describe('offer-put for suppliers', () => {
  test('owner, digest claim, foreign offers unseen, deletion frees the digest', async () => {
    const a = await seedSupplier()
    const b = await seedSupplier()
    const offer = await supplierOffer(a, 40, 'digest-1')
    expect(offer.supplierId).toBe(a)
    expect(await fx.store.hget(fx.keys.upstreamKeys, 'digest-1')).toBe(offer.id)
    await expect(supplierOffer(b, 40, 'digest-1')).rejects.toMatchObject({
      status: 409,
      code: 'upstream_key_in_use',
    })
    await expect(fx.offers.update(offer.id, { askCents: 30, supplierId: b })).rejects.toMatchObject({
      status: 404,
    })
    await expect(fx.offers.remove(offer.id, b)).rejects.toMatchObject({ status: 404 })
    expect((await fx.offers.get(offer.id))!.askCents).toBe(40)
    await fx.offers.remove(offer.id, a)
    expect(await fx.store.hexists(fx.keys.upstreamKeys, 'digest-1')).toBe(0)
    expect((await supplierOffer(b, 40, 'digest-1')).supplierId).toBe(b)
    await expect(supplierOffer('spl_nobody')).rejects.toMatchObject({
      status: 404,
      code: 'supplier_not_found',
    })
  })

  test('suspension: offers leave the ladder at once, cannot be posted or activated, and return when reinstated', async () => {
    const id = await seedSupplier()
    const store = new SupplierStore(fx.store, fx.keys)
    const active = await supplierOffer(id, 40)
    const paused = await supplierOffer(id, 45)
    await fx.offers.update(paused.id, { status: 'paused', supplierId: id })
    expect(await onLadder(active.id)).toBe(true)
    expect((await store.setStatus(id, 'suspended')).status).toBe('suspended')
    expect(await onLadder(active.id)).toBe(false)
    await expect(supplierOffer(id)).rejects.toMatchObject({ status: 403, code: 'supplier_suspended' })
    await expect(fx.offers.update(paused.id, { status: 'active', supplierId: id })).rejects.toMatchObject({
      status: 403,
      code: 'supplier_suspended',
    })
    // a change that does not activate is allowed, and keeps it off the ladder
    expect((await fx.offers.update(active.id, { askCents: 35, supplierId: id })).askCents).toBe(35)
    expect(await onLadder(active.id)).toBe(false)
    await store.setStatus(id, 'active')
    expect(await onLadder(active.id)).toBe(true)
    expect(await onLadder(paused.id)).toBe(false)
    const score = Number(await fx.store.zscore(fx.keys.ladder, active.id))
    expect(Math.floor(score / 1e9)).toBe(35)
    await expect(store.setStatus('spl_nobody', 'active')).rejects.toMatchObject({ status: 404 })
  })
})

describe('clear appends fills', () => {
  test('a clear on a supplier offer is a fill; a replayed clear adds none; an operator offer has none', async () => {
    const id = await seedSupplier()
    const offer = await supplierOffer(id, 40)
    const acct = await seedAccount(fx, 1_000_000)
    const adm = admitted(await admitFor(fx, acct, { holdDiem: 1_000 as MicroDiem }))
    const cleared = await clearFor(fx, adm.attemptId, 777, { feeBps: 500 })
    await clearFor(fx, adm.attemptId, 777, { feeBps: 500 })
    const entries = (await fills(id)) as [string, string[]][]
    expect(entries).toHaveLength(1)
    const fee = Math.floor((cleared.charged as number) * 0.05)
    expect(field(entries[0]!, 'earnedUsdc')).toBe(String((cleared.charged as number) - fee))
    expect(field(entries[0]!, 'burnDiem')).toBe('777')
    expect(field(entries[0]!, 'askCents')).toBe('40')
    expect(field(entries[0]!, 'offer')).toBe(offer.id)
    expect(JSON.stringify(entries)).not.toContain(acct)
    expect(await fx.store.hget(fx.keys.offer(offer.id), 'earned')).toBe(field(entries[0]!, 'earnedUsdc')!)
    // the operator's cheaper offer clears the next request: no fill anywhere
    const operators = await postOffer(fx, 30, 5_000_000)
    const next = admitted(await admitFor(fx, acct))
    expect(next.offerId).toBe(operators)
    await clearFor(fx, next.attemptId, 500)
    expect(await fills(id)).toHaveLength(1)
    expect(await keysUnder(fx.store, `${fx.keys.prefix}:`, '*:fills')).toEqual([fx.keys.supplierFills(id)])
    expect(await auditAll(fx.store, fx.keys)).toEqual([])
  })

  test('a late clear after a reap is a fill of what was charged', async () => {
    const id = await seedSupplier()
    await supplierOffer(id, 50)
    const acct = await seedAccount(fx, 300)
    const adm = admitted(await admitFor(fx, acct, { leaseMs: 50, holdDiem: 500 as MicroDiem }))
    await untilRedisPasses(fx.store, adm.leaseDeadline)
    expect(await reapExpired(fx.store, fx.keys)).toBe(1)
    // Another request holds 200 of the 300 when the late clear comes: it can charge 100 of its 250.
    admitted(await admitFor(fx, acct, { holdDiem: 400 as MicroDiem }))
    expect(await fx.store.hget(fx.keys.account(acct), 'confirmed')).toBe('100')
    const late = await clearFor(fx, adm.attemptId, 500, { feeBps: 1_000 })
    expect(late.charged).toBe(100 as never)
    const entries = (await fills(id)) as [string, string[]][]
    expect(entries.map((e) => field(e, 'earnedUsdc'))).toEqual(['90'])
    expect(await auditAll(fx.store, fx.keys)).toEqual([])
  })

  test('the audit names fills that disagree with earnings, a foreign offer, and payable below zero', async () => {
    const id = await seedSupplier()
    const offer = await supplierOffer(id, 40)
    const acct = await seedAccount(fx, 1_000_000)
    const adm = admitted(await admitFor(fx, acct))
    await clearFor(fx, adm.attemptId, 500)
    expect(await auditAll(fx.store, fx.keys)).toEqual([])
    await fx.store.xadd(fx.keys.supplierFills(id), '*', 'offer', offer.id, 'earnedUsdc', '5')
    await fx.store.sadd(fx.keys.supplierOffers(id), 'stray')
    await fx.store.hset(fx.keys.supplier(id), 'paidOut', '1000000')
    const problems = (await auditAll(fx.store, fx.keys)).map((f) => f.problem)
    expect(problems).toEqual([
      'offer stray in its offers names supplier none',
      "fills earned 205 != its offers' earned 200",
      'payable -999800 is below zero (earned 200, paid out 1000000, pending 0)',
      // the payouts' half of the audit comes after the suppliers'
      "paid out 1000000 != its confirmed payouts' 0",
    ])
  })
})
