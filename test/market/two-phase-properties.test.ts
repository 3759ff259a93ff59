// Property test of the market held apart, on a real three-master Redis Cluster: random requests
// from several accounts on several offers go through MarketSteps all at once, each ending as the
// request path ends it (cleared at a random burn, released, or a late clear after its lease ran
// out) or left by a replica that stopped between two steps (after the admission, or after the
// account's side of a clear). Once every lease has run out and the reaper has finished what was
// left, every pair across slots agrees (auditApart), nothing is held or in flight on either side,
// and what the accounts paid is exactly what the offers earned plus the fees.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import fc from 'fast-check'
import { AccountStore } from '../../src/accounts/accounts.ts'
import type { Admission } from '../../src/market/admission.ts'
import { auditApart } from '../../src/market/audit-apart.ts'
import { clear } from '../../src/market/clearing.ts'
import { OfferService } from '../../src/market/offers.ts'
import { type MarketSteps, marketSteps } from '../../src/market/steps.ts'
import { type Owners, ownerKeyspaces } from '../../src/market/two-phase.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { admitRequest, meteredClear } from '../helpers/market.ts'
import { type RedisCluster, startRedisCluster } from '../helpers/redis-cluster.ts'
import { untilRedisPasses } from '../helpers/wait.ts'

let cluster: RedisCluster
let store: Store

beforeAll(async () => {
  cluster = await startRedisCluster()
  store = createStore(cluster.url, { name: 'svc-test-two-phase-properties' })
  await store.whenReady(15_000)
})
afterAll(() => {
  store.close()
  cluster.stop()
})

type Ending = 'clear' | 'release' | 'late clear' | 'gone after admission' | 'gone after the charge'
const ENDINGS: Ending[] = ['clear', 'release', 'late clear', 'gone after admission', 'gone after the charge']
const LEASE_MS = 150

/** A market of its own per run: its accounts (with one key each) and its offers, held apart. */
async function market(asks: number[], accounts: number) {
  const keys = keyspace(`p${randomBytes(4).toString('hex')}:{m}`, 'apart')
  const owners = ownerKeyspaces(keys.prefix)
  const offers = new OfferService(store, keys, randomBytes(32))
  const offerIds: string[] = []
  for (const ask of asks) {
    const offer = await offers.create({
      upstreamBaseUrl: 'http://127.0.0.1:1',
      upstreamApiKey: randomBytes(8).toString('hex'),
      askCents: ask,
      capacity: 200_000 as MicroDiem,
      maxInFlight: 4,
    })
    offerIds.push(offer.id)
  }
  const accountStore = new AccountStore(store, keys)
  const buyers: { accountId: string; apiKeyId: string }[] = []
  for (let i = 0; i < accounts; i++) {
    const { account } = await accountStore.create(`0x${randomBytes(20).toString('hex')}`, 80)
    await accountStore.credit(account.id, '0.100000', 'test funds', 'test')
    const [apiKeyId] = await store.hkeys(keys.accountKeys(account.id))
    buyers.push({ accountId: account.id, apiKeyId: apiKeyId! })
  }
  return { keys, owners, offerIds, buyers, steps: marketSteps(store, keys) }
}

/** Ends one admitted request as `ending` says. */
async function end(
  steps: MarketSteps,
  owners: Owners,
  admission: Admission,
  ending: Ending,
  burn: number,
  feeBps: number,
) {
  const billed = { ...meteredClear(admission.attemptId, burn), feeBps }
  const { attemptId: _, ...request } = billed
  switch (ending) {
    case 'clear':
      return steps.clear(admission, request)
    case 'release':
      return steps.release(admission, {
        errorCode: 'upstream_error',
        cooldownMs: 0,
        upstreamBalance: null,
        final: true,
      })
    case 'late clear':
      // The result comes after the lease ran out and the reaper gave the hold back.
      await untilRedisPasses(store, admission.leaseDeadline)
      await steps.reap(100)
      return steps.clear(admission, request)
    case 'gone after admission':
      return
    case 'gone after the charge':
      // The account's side of the clear, and then nothing: the post is the reaper's to make.
      return clear(store, owners.account(admission.accountId), { ...billed, offerApart: true })
  }
}

test('any mix of endings, at once, across accounts and offers on three masters: every pair agrees and the money is exact', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.integer({ min: 30, max: 80 }), { minLength: 1, maxLength: 3 }),
      fc.array(
        fc.record({
          buyer: fc.nat(2),
          holdDiem: fc.integer({ min: 1, max: 60_000 }),
          burnShare: fc.double({ min: 0, max: 1.5, noNaN: true }),
          ending: fc.constantFrom(...ENDINGS),
        }),
        { minLength: 1, maxLength: 10 },
      ),
      fc.integer({ min: 0, max: 2_000 }),
      async (asks, requests, feeBps) => {
        const m = await market(asks, 3)
        const admissions = await Promise.all(
          requests.map(async (r, i) => {
            const buyer = m.buyers[r.buyer]!
            const admitted = await m.steps.admit(
              admitRequest(buyer.accountId, {
                apiKeyId: buyer.apiKeyId,
                attemptId: `sr_${randomBytes(8).toString('hex')}.${i + 1}`,
                holdDiem: r.holdDiem as MicroDiem,
                leaseMs: LEASE_MS,
                defaultMaxPriceCents: 80,
              }),
            )
            if (admitted.code !== AdmitCode.Admitted) return null
            const admission = admitted as Admission
            await end(m.steps, m.owners, admission, r.ending, Math.floor(r.holdDiem * r.burnShare), feeBps)
            return admission
          }),
        )
        // The posts the replica queued go out, as at its close (a late clear's among them).
        await m.steps.close()
        // Every lease runs out; then the reaper finishes what the stopped replicas left.
        const deadline = Math.max(0, ...admissions.map((a) => a?.leaseDeadline ?? 0))
        await untilRedisPasses(store, deadline)
        while ((await m.steps.reap(100)) > 0) {}

        expect(await auditApart(store, m.keys.prefix)).toEqual([])
        let spent = 0
        for (const { accountId } of m.buyers) {
          const row = await store.hgetall(m.keys.account(accountId))
          expect({ held: row.held, inflight: row.inflight ?? '0' }).toEqual({ held: '0', inflight: '0' })
          expect(Number(row.confirmed) + Number(row.spent)).toBe(100_000)
          spent += Number(row.spent)
        }
        let earned = 0
        for (const offerId of m.offerIds) {
          const row = await store.hgetall(m.keys.offer(offerId))
          expect({ held: row.held, inflight: row.inflight }).toEqual({ held: '0', inflight: '0' })
          earned += Number(row.earned) + Number(row.fees ?? 0)
        }
        expect(earned).toBe(spent)
      },
    ),
    { numRuns: 15 },
  )
})
