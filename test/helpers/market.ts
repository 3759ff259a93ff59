// Fixtures for the market's script tests: a fresh keyspace on the test redis-server, accounts
// written in the account model of src/redis/keys.ts, offers posted through the real OfferService.
import { afterAll, beforeEach, expect } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import { type Admission, type AdmitRequest, admit } from '../../src/market/admission.ts'
import { type ClearRequest, clear } from '../../src/market/clearing.ts'
import { OfferService } from '../../src/market/offers.ts'
import type { AdmitRefusal } from '../../src/market/refusal-errors.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { ACCOUNT_TABLE, type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import type { Store } from '../../src/redis/store.ts'
import { createStore, type ScriptForm } from '../../src/redis/store.ts'
import { onCluster, testPrefix, testRedisUrl } from './stack.ts'
import { until } from './wait.ts'

export interface MarketFixture {
  store: Store
  keys: Keyspace
  offers: OfferService
  close(): void
}

/**
 * The ways a script runs on the run's Redis: on a single one FCALL on the native lane and EVALSHA
 * through ioredis; on a Cluster the one form its store has, FCALL routed by the keys.
 */
export function scriptForms(): ScriptForm[] {
  return onCluster() ? ['functions'] : ['functions', 'scripts']
}

export function marketFixture(scriptForm: ScriptForm = 'functions'): MarketFixture {
  const store = createStore(testRedisUrl(), { name: 'svc-test-market', scriptForm })
  const keys = keyspace(testPrefix())
  return {
    store,
    keys,
    offers: new OfferService(store, keys, randomBytes(32)),
    close: () => store.close(),
  }
}

/** Another market (its own prefix) on `fx`'s connection: a test that makes hundreds opens one. */
export function marketOn(fx: MarketFixture): MarketFixture {
  const keys = keyspace(testPrefix())
  return { store: fx.store, keys, offers: new OfferService(fx.store, keys, randomBytes(32)), close: () => {} }
}

/** An account holding `confirmed` micro-USDC, funded by exactly that (`id`: its id, else a new one), key-1 its first key. */
export async function seedAccount(
  fx: Pick<MarketFixture, 'store' | 'keys'>,
  confirmed: number,
  maxPriceCents = 50,
  id = `acct_${randomUUID()}`,
): Promise<string> {
  // As lua/create-account.lua writes it: the fields every request touches first, with its first
  // key's counters (key-1, admitRequest's).
  await fx.store.hset(fx.keys.account(id), {
    confirmed,
    held: 0,
    inflight: 0,
    'held:key-1': 0,
    'inflight:key-1': 0,
    spent: 0,
    'spent:key-1': 0,
    maxPriceCents,
    hooks: 0,
    id,
    wallet: `0x${randomBytes(20).toString('hex')}`,
    createdAt: Date.now(),
    pending: 0,
    funded: confirmed,
    writtenOff: 0,
    table: ACCOUNT_TABLE,
  })
  // Its funds, recorded as an operator's credit by hand records them (lua/credit.lua).
  if (confirmed > 0) {
    await fx.store.xadd(
      fx.keys.auditOf(id),
      '*',
      'action',
      'credit',
      'accountId',
      id,
      'amountMicroUsdc',
      confirmed,
    )
  }
  await fx.store.sadd(fx.keys.accounts, id)
  return id
}

/** A supplier written in the supplier model of src/redis/keys.ts, with a random wallet. */
export async function seedSupplier(
  fx: Pick<MarketFixture, 'store' | 'keys'>,
  status = 'active',
): Promise<string> {
  const id = `spl_${randomBytes(12).toString('hex')}`
  const wallet = `0x${randomBytes(20).toString('hex')}`
  await fx.store.hset(fx.keys.supplier(id), {
    id,
    wallet,
    status,
    createdAt: Date.now(),
    paidOut: 0,
    pending: 0,
  })
  await fx.store.sadd(fx.keys.suppliers, id)
  await fx.store.hset(fx.keys.supplierWallets, wallet, id)
  return id
}

export async function postOffer(
  fx: MarketFixture,
  askCents: number,
  capacity: number,
  extra: { maxInFlight?: number; status?: 'active' | 'paused' } = {},
): Promise<string> {
  const offer = await fx.offers.create({
    upstreamBaseUrl: 'http://127.0.0.1:1',
    upstreamApiKey: `upstream-${randomUUID()}`,
    askCents,
    capacity: capacity as MicroDiem,
    ...extra,
  })
  return offer.id
}

/** An offer's row as written on its own slot when held apart: active, nothing held or in flight. */
export function apartOfferRow(id: string, ask: number, capacity: number, maxInFlight: number) {
  return {
    id,
    status: 'active',
    askCents: ask,
    capacity,
    burned: 0,
    held: 0,
    earned: 0,
    fees: 0,
    maxInFlight,
    inflight: 0,
    cooldownUntil: 0,
    upstreamBaseUrl: 'http://127.0.0.1:1',
    upstreamKeyEnc: 'sealed',
  }
}

/** An admission's request for key-1 of `accountId`: a 1,000 micro-DIEM hold, caps out of the way. */
export function admitRequest(accountId: string, over: Partial<AdmitRequest> = {}): AdmitRequest {
  return {
    attemptId: randomUUID(),
    accountId,
    apiKeyId: 'key-1',
    holdDiem: 1_000 as MicroDiem,
    keyCap: 1_000_000,
    accountCap: 1_000_000,
    leaseMs: 60_000,
    tried: [],
    defaultMaxPriceCents: 50,
    model: 'llama-3.3-70b',
    requestId: 'req_test',
    ...over,
  }
}

export function admitFor(
  fx: MarketFixture,
  accountId: string,
  over: Partial<AdmitRequest> = {},
): Promise<Admission | AdmitRefusal> {
  return admit(fx.store, fx.keys, admitRequest(accountId, over))
}

/** A clear from a metered burn (10 tokens in, 20 out, completed), as the relay would ask it. */
export function meteredClear(
  attemptId: string,
  burn: number,
  extra: Partial<ClearRequest> = {},
): ClearRequest {
  return {
    attemptId,
    burn: burn as MicroDiem,
    feeBps: 0,
    upstreamBalanceAfter: null,
    inputTokens: 10,
    outputTokens: 20,
    estimated: false,
    outcome: 'completed',
    ...extra,
  }
}

/** Clears an attempt from a metered burn (10 tokens in, 20 out, completed), as the relay would. */
export function clearFor(
  fx: MarketFixture,
  attemptId: string,
  burn: number,
  extra: Partial<ClearRequest> = {},
) {
  return clear(fx.store, fx.keys, meteredClear(attemptId, burn, extra))
}

/** A fresh keyspace for every test of the calling file (handed to `use`), all closed at its end. */
export function freshMarketPerTest(use: (fx: MarketFixture) => void, scriptForm?: ScriptForm): void {
  const fixtures: MarketFixture[] = []
  beforeEach(async () => {
    const fx = marketFixture(scriptForm)
    fixtures.push(fx)
    // Functions only once the lane is up: sooner, ioredis would carry the first scripts. A
    // Cluster's store has no lane.
    if (scriptForm === 'functions' && !onCluster()) await until(() => fx.store.lane !== undefined)
    use(fx)
  })
  afterAll(() => {
    for (const f of fixtures) f.close()
  })
}

/** The admission, after checking that the script admitted. */
export function admitted(result: unknown): Admission {
  expect((result as { code: number }).code).toBe(AdmitCode.Admitted)
  return result as Admission
}
