// The money scripts, tested directly against a real Redis: admit, clear, release, renew, reap.
import { describe, expect, test } from 'bun:test'
import libKeys from '../../lua/lib/keys.lua' with { type: 'text' }
import libNumbers from '../../lua/lib/numbers.lua' with { type: 'text' }
import { auditMarket, listWriteOffs } from '../../src/market/audit.ts'
import { ClearingError, type ClearRequest, release } from '../../src/market/clearing.ts'
import { reapExpired, renewLease } from '../../src/market/leases.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { dayOf } from '../../src/records/days.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { attemptRecord, setAttemptValue } from '../helpers/attempts.ts'
import {
  admitFor,
  admitted,
  clearFor,
  freshMarketPerTest,
  type MarketFixture,
  postOffer,
  scriptForms,
  seedAccount,
} from '../helpers/market.ts'
import { onCluster } from '../helpers/stack.ts'
import { untilRedisPasses } from '../helpers/wait.ts'

let fx: MarketFixture
const fresh = (each: MarketFixture) => {
  fx = each
}

const account = (id: string) => fx.store.hgetall(fx.keys.account(id))
// Every refusal says whose request it was (admit may have resolved it from a key digest).
const by = (accountId: string, apiKeyId = 'key-1') => ({ who: { accountId, apiKeyId } })
const offer = (id: string) => fx.store.hgetall(fx.keys.offer(id))
const clearOf = (attemptId: string, burn: number, extra: Partial<ClearRequest> = {}) =>
  clearFor(fx, attemptId, burn, extra)

describe('the Lua libraries', () => {
  freshMarketPerTest(fresh)

  describe('lua key names', () => {
    test('lib/keys builds the same names as src/redis/keys.ts', async () => {
      const script = `${libKeys}\nuse_keyspace(KEYS[1])\nreturn { k_account('A'), k_offer('O'), k_attempt('T'), K_LADDER, K_FULL, K_OFFERS, K_LEASES, K_MARKET, k_stats_day('D'), k_apikey('K') }`
      const names = await fx.store.eval(
        script.replace(
          "k_apikey('K') }",
          "k_apikey('K'), K_WRITEOFFS, K_ENDED, k_activity('A'), k_account_keys('A'), k_account_payments('A') }",
        ),
        1,
        fx.keys.base,
      )
      expect(names).toEqual([
        fx.keys.account('A'),
        fx.keys.offer('O'),
        fx.keys.attempt('T'),
        fx.keys.ladder,
        fx.keys.full,
        fx.keys.offers,
        fx.keys.leases,
        fx.keys.market,
        fx.keys.statsDay('D'),
        fx.keys.apiKey('K'),
        fx.keys.writeoffs,
        fx.keys.endedAttempts,
        fx.keys.accountActivity('A'),
        fx.keys.accountKeys('A'),
        fx.keys.accountPayments('A'),
      ])
    })
  })

  describe('lua numbers', () => {
    test('int and s answer the same from their caches as without them', async () => {
      const values = [
        '0',
        '7',
        '0007',
        '7.5',
        '1023',
        '1024',
        '-3',
        '',
        'abc',
        '123456789012345',
        '0x10',
        ' 12 ',
      ]
      // Each value twice in one call: the second answer comes from the cache when it was kept.
      const script = `${libNumbers}\nbind_globals()
  local out = {}
  for _, v in ipairs(ARGV) do
    for _ = 1, 2 do
      local n = int(v)
      out[#out + 1] = string.format('%.17g', n)
      out[#out + 1] = s(n)
      out[#out + 1] = s(n)
    end
  end
  return out`
      const got = (await fx.store.eval(script, 0, ...values)) as string[]
      const want = values.flatMap((v) => {
        const n = Number.isNaN(Number(v)) || v.trim() === '' ? 0 : Number(v)
        const asInt = String(Math.trunc(n))
        return [String(n), asInt, asInt, String(n), asInt, asInt]
      })
      expect(got).toEqual(want)
    })
  })
})

// Every money script in both forms on a single Redis: FCALL on the native lane, EVALSHA through
// ioredis (Sentinel, a lane that is down); on a Cluster, FCALL routed by the keys.
describe.each(scriptForms())('as %s', (form) => {
  freshMarketPerTest(fresh, form)

  test('the scripts run in this form', () => {
    expect(fx.store.lane !== undefined).toBe(form === 'functions' && !onCluster())
  })

  describe('admit', () => {
    test('routes to the cheapest eligible offer and holds the worst case at its ask', async () => {
      await postOffer(fx, 45, 5_000_000)
      const cheap = await postOffer(fx, 35, 5_000_000)
      await postOffer(fx, 40, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      const result = admitted(await admitFor(fx, acct, { holdDiem: 1_001 as MicroDiem }))
      expect(result.offerId).toBe(cheap)
      expect(result.askCents).toBe(35)
      expect(result.holdUsdc as number).toBe(Math.ceil((1_001 * 35) / 100))
      const a = await account(acct)
      expect(Number(a.confirmed)).toBe(1_000_000 - result.holdUsdc)
      expect(Number(a.held)).toBe(result.holdUsdc)
      const o = await offer(cheap)
      expect(o.held).toBe('1001')
      expect(o.inflight).toBe('1')
    })

    test('ties at one ask break stably, by posting order', async () => {
      const first = await postOffer(fx, 40, 5_000_000)
      await postOffer(fx, 40, 5_000_000)
      await postOffer(fx, 40, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      for (let i = 0; i < 3; i++) expect(admitted(await admitFor(fx, acct)).offerId).toBe(first)
    })

    test('skips offers already tried, paused offers and offers at their in-flight cap', async () => {
      const a = await postOffer(fx, 31, 5_000_000)
      const b = await postOffer(fx, 32, 5_000_000, { maxInFlight: 1 })
      await postOffer(fx, 33, 5_000_000, { status: 'paused' })
      const c = await postOffer(fx, 34, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      expect(admitted(await admitFor(fx, acct, { tried: [a] })).offerId).toBe(b)
      expect(admitted(await admitFor(fx, acct, { tried: [a] })).offerId).toBe(c)
    })

    test('capacity is capped by the last known upstream balance and reduced by holds', async () => {
      const small = await postOffer(fx, 30, 5_000_000)
      const big = await postOffer(fx, 40, 5_000_000)
      // learned today: a balance from an earlier UTC day no longer holds
      await fx.store.hset(fx.keys.offer(small), 'balance', '1500', 'balanceDay', dayOf(Date.now()))
      const acct = await seedAccount(fx, 1_000_000)
      expect(admitted(await admitFor(fx, acct, { holdDiem: 1_000 as MicroDiem })).offerId).toBe(small)
      // 500 routable left on the small one: the next 1,000 goes to the bigger
      expect(admitted(await admitFor(fx, acct, { holdDiem: 1_000 as MicroDiem })).offerId).toBe(big)
    })

    test('pool_empty when nothing is posted', async () => {
      const acct = await seedAccount(fx, 1_000_000)
      expect(await admitFor(fx, acct)).toEqual({ code: AdmitCode.PoolEmpty, ...by(acct) })
    })

    test('no_eligible_supply with the hint values when supply is only above the max', async () => {
      await postOffer(fx, 70, 2_000_000)
      await postOffer(fx, 60, 3_000_000)
      const acct = await seedAccount(fx, 1_000_000, 50)
      expect(await admitFor(fx, acct)).toEqual({
        code: AdmitCode.NoEligibleSupply,
        ...by(acct),
        buyerMaxCents: 50,
        cheapestPostedCents: 60,
        routableAboveMax: 5_000_000,
      })
    })

    test('insufficient_routable_at_price when offers at the price are too small', async () => {
      await postOffer(fx, 40, 3_000)
      await postOffer(fx, 45, 4_000)
      await postOffer(fx, 60, 9_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      expect(await admitFor(fx, acct, { holdDiem: 5_000 as MicroDiem })).toEqual({
        code: AdmitCode.InsufficientRoutable,
        ...by(acct),
        eligibleRoutable: 7_000,
        maxEligibleOffer: 4_000,
      })
    })

    test('keys busy when every big-enough offer is at its cap; exhausted when all were tried', async () => {
      const only = await postOffer(fx, 40, 5_000_000, { maxInFlight: 1 })
      const acct = await seedAccount(fx, 1_000_000)
      admitted(await admitFor(fx, acct))
      expect(await admitFor(fx, acct)).toEqual({ code: AdmitCode.KeysBusy, ...by(acct) })
      expect(await admitFor(fx, acct, { tried: [only] })).toEqual({
        code: AdmitCode.SupplyExhausted,
        ...by(acct),
      })
    })

    test('a cooling-down offer is skipped, and alone it reads as busy', async () => {
      const cool = await postOffer(fx, 30, 5_000_000)
      const warm = await postOffer(fx, 40, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      await fx.store.hset(fx.keys.offer(cool), 'cooldownUntil', Date.now() + 60_000)
      expect(admitted(await admitFor(fx, acct)).offerId).toBe(warm)
      await fx.offers.update(warm, { status: 'paused' })
      expect(await admitFor(fx, acct)).toEqual({ code: AdmitCode.KeysBusy, ...by(acct) })
    })

    test('429 codes: the per-key and per-wallet caps', async () => {
      await postOffer(fx, 40, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      admitted(await admitFor(fx, acct, { apiKeyId: 'k1', keyCap: 1, accountCap: 2 }))
      expect(await admitFor(fx, acct, { apiKeyId: 'k1', keyCap: 1, accountCap: 2 })).toEqual({
        code: AdmitCode.KeyConcurrency,
        ...by(acct, 'k1'),
      })
      admitted(await admitFor(fx, acct, { apiKeyId: 'k2', keyCap: 1, accountCap: 2 }))
      expect(await admitFor(fx, acct, { apiKeyId: 'k3', keyCap: 1, accountCap: 2 })).toEqual({
        code: AdmitCode.BuyerConcurrency,
        ...by(acct, 'k3'),
      })
    })

    test('402 when confirmed balance cannot cover the worst case; nothing moves', async () => {
      await postOffer(fx, 50, 50_000_000)
      const acct = await seedAccount(fx, 499)
      const before = await account(acct)
      expect(await admitFor(fx, acct, { holdDiem: 1_000 as MicroDiem })).toEqual({
        code: AdmitCode.InsufficientBalance,
        ...by(acct),
        needed: 500,
        confirmed: 499,
        askCents: 50,
      })
      expect(await account(acct)).toEqual(before)
    })

    test('pending balance is not spendable', async () => {
      await postOffer(fx, 50, 50_000_000)
      const acct = await seedAccount(fx, 0)
      await fx.store.hset(fx.keys.account(acct), 'pending', 1_000_000, 'funded', 1_000_000)
      expect((await admitFor(fx, acct)).code).toBe(AdmitCode.InsufficientBalance)
    })

    test('an unknown account and a reused attempt id are refused', async () => {
      await postOffer(fx, 50, 50_000_000)
      expect((await admitFor(fx, 'acct_nobody')).code).toBe(AdmitCode.UnknownAccount)
      const acct = await seedAccount(fx, 1_000_000)
      const first = admitted(await admitFor(fx, acct, { attemptId: 'same' }))
      // Refused before any write: the account, the offer, the leases and the record stay as they were.
      const state = async () => ({
        account: await fx.store.hgetall(fx.keys.account(acct)),
        offer: await fx.store.hgetall(fx.keys.offer(first.offerId)),
        leases: await fx.store.zrange(fx.keys.leases, 0, -1, 'WITHSCORES'),
        attempt: await fx.store.hgetall(fx.keys.attempt('same')),
      })
      const admittedState = await state()
      expect((await admitFor(fx, acct, { attemptId: 'same' })).code).toBe(AdmitCode.DuplicateAttempt)
      expect(await state()).toEqual(admittedState)
      // Ended, its id is still used.
      await clearFor(fx, 'same', 500)
      const clearedState = await state()
      expect((await admitFor(fx, acct, { attemptId: 'same' })).code).toBe(AdmitCode.DuplicateAttempt)
      expect(await state()).toEqual(clearedState)
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    })
  })

  describe('admit by API key digest', () => {
    test('resolves the key to its account in the same call, and writes lastUsedAt at most once a minute', async () => {
      await postOffer(fx, 40, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      await fx.store.hset(fx.keys.apiKey('d1'), { id: 'key-9', accountId: acct, lastUsedAt: 0 })
      const first = admitted(await admitFor(fx, '', { apiKeyId: '', apiKeyDigest: 'd1' }))
      expect([first.accountId, first.apiKeyId]).toEqual([acct, 'key-9'])
      expect((await attemptRecord(fx.store, fx.keys.attempt(first.attemptId))).keyId).toBe('key-9')
      const touched = await fx.store.hget(fx.keys.apiKey('d1'), 'lastUsedAt')
      expect(Number(touched)).toBeGreaterThan(0)
      admitted(await admitFor(fx, '', { apiKeyId: '', apiKeyDigest: 'd1' }))
      expect(await fx.store.hget(fx.keys.apiKey('d1'), 'lastUsedAt')).toBe(touched)
      expect(await fx.store.hget(fx.keys.account(acct), 'inflight:key-9')).toBe('2')
    })

    test('an unknown or revoked key is refused before anything is read or held', async () => {
      await postOffer(fx, 40, 5_000_000)
      expect(await admitFor(fx, '', { apiKeyId: '', apiKeyDigest: 'nope' })).toEqual({
        code: AdmitCode.UnknownKey,
      })
      expect(await fx.store.zcard(fx.keys.leases)).toBe(0)
    })
  })

  describe('clear', () => {
    test('charges ceil(burn x ask / 100), returns the rest, credits the supplier; idempotent', async () => {
      const o = await postOffer(fx, 45, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      const adm = admitted(await admitFor(fx, acct, { holdDiem: 10_000 as MicroDiem }))
      expect(adm.holdUsdc as number).toBe(4_500)
      const result = await clearOf(adm.attemptId, 3_333)
      expect(result).toEqual({
        charged: 1_500, // ceil(3333 * 45 / 100) = ceil(1499.85)
        cost: 1_500,
        burn: 3_333,
        askCents: 45,
        confirmedAfter: 998_500,
        writtenOff: 0,
        disputed: 0,
        replay: false,
        fee: 0,
        admissionLost: false,
      } as never)
      const a = await account(acct)
      expect([a.confirmed, a.held, a.spent]).toEqual(['998500', '0', '1500'])
      const of = await offer(o)
      expect([of.burned, of.held, of.inflight, of.earned]).toEqual(['3333', '0', '0', '1500'])
      expect(await fx.store.zcard(fx.keys.leases)).toBe(0)

      const again = await clearOf(adm.attemptId, 3_333)
      expect(again.replay).toBe(true)
      expect(again.charged).toBe(1_500 as never)
      expect(await account(acct)).toEqual(a)
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    })

    test('a platform fee splits the cost; buyer spend = earnings + fees', async () => {
      const o = await postOffer(fx, 50, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      const adm = admitted(await admitFor(fx, acct, { holdDiem: 10_000 as MicroDiem }))
      expect((await clearOf(adm.attemptId, 10_000, { feeBps: 250 })).fee).toBe(125 as never)
      expect(await offer(o)).toMatchObject({ earned: String(5_000 - 125), fees: '125' })
      // A replayed clear says the same fee.
      expect((await clearOf(adm.attemptId, 10_000, { feeBps: 250 })).fee).toBe(125 as never)
      expect((await account(acct)).spent).toBe('5000')
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
      // A fee kept twice breaks the balance the audit checks.
      await fx.store.hincrby(fx.keys.offer(o), 'fees', 125)
      expect(await auditMarket(fx.store, fx.keys)).toEqual([
        { subject: 'market', problem: 'buyer spend 5000 != supplier earnings 4875 + fees 250' },
      ])
    })

    test('bills at most the hold: burn reported beyond it is disputed, never paid or written off', async () => {
      const o = await postOffer(fx, 50, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      const adm = admitted(await admitFor(fx, acct, { holdDiem: 1_000 as MicroDiem }))
      const result = await clearOf(adm.attemptId, 3_000)
      expect(result).toMatchObject({
        charged: 500,
        cost: 500,
        burn: 1_000,
        writtenOff: 0,
        disputed: 2_000,
      } as never)
      expect(await offer(o)).toMatchObject({ burned: '1000', earned: '500', disputed: '2000' })
      expect(await attemptRecord(fx.store, fx.keys.attempt(adm.attemptId))).toMatchObject({
        burn: '1000',
        costUsdc: '500',
        disputed: '2000',
      })
      expect((await account(acct)).writtenOff).toBe('0')
      // A replay answers the same, disputed included, and changes nothing.
      expect(await clearOf(adm.attemptId, 3_000)).toMatchObject({
        charged: 500,
        disputed: 2_000,
        replay: true,
      } as never)
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    })

    test('bills at most the bounded burn: the reported burn past it is disputed as past the hold', async () => {
      const o = await postOffer(fx, 50, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      const adm = admitted(await admitFor(fx, acct, { holdDiem: 1_000 as MicroDiem }))
      const result = await clearOf(adm.attemptId, 3_000, { boundedBurn: 400 as MicroDiem })
      expect(result).toMatchObject({ charged: 200, burn: 400, writtenOff: 0, disputed: 2_600 } as never)
      expect(await offer(o)).toMatchObject({ burned: '400', earned: '200', disputed: '2600' })
      expect(await attemptRecord(fx.store, fx.keys.attempt(adm.attemptId))).toMatchObject({
        burn: '400',
        costUsdc: '200',
        disputed: '2600',
      })
      expect((await fx.store.hgetall(fx.keys.market)).disputed).toBe('2600')
      // A bound above the hold leaves the hold the cap; one above the burn caps nothing.
      const past = admitted(await admitFor(fx, acct, { holdDiem: 1_000 as MicroDiem }))
      expect(await clearOf(past.attemptId, 3_000, { boundedBurn: 2_000 as MicroDiem })).toMatchObject({
        burn: 1_000,
        disputed: 2_000,
      } as never)
      const within = admitted(await admitFor(fx, acct, { holdDiem: 1_000 as MicroDiem }))
      expect(await clearOf(within.attemptId, 300, { boundedBurn: 900 as MicroDiem })).toMatchObject({
        burn: 300,
        disputed: 0,
      } as never)
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    })

    test('disputes on one offer add up, on a clear and on a late clear after a reap', async () => {
      const o = await postOffer(fx, 50, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      const first = admitted(await admitFor(fx, acct, { holdDiem: 1_000 as MicroDiem }))
      expect((await clearOf(first.attemptId, 3_000)).disputed).toBe(2_000 as never)
      const second = admitted(await admitFor(fx, acct, { holdDiem: 1_000 as MicroDiem }))
      expect((await clearOf(second.attemptId, 1_500)).disputed).toBe(500 as never)
      expect((await offer(o)).disputed).toBe('2500')
      const late = admitted(await admitFor(fx, acct, { leaseMs: 50, holdDiem: 1_000 as MicroDiem }))
      await untilRedisPasses(fx.store, late.leaseDeadline)
      expect(await reapExpired(fx.store, fx.keys)).toBe(1)
      expect((await clearOf(late.attemptId, 1_200)).disputed).toBe(200 as never)
      expect(await offer(o)).toMatchObject({ burned: '3000', disputed: '2700' })
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    })

    test('a supplier reporting past a safe integer is only disputed; the charge stays the hold', async () => {
      await postOffer(fx, 80, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000, 80)
      const adm = admitted(await admitFor(fx, acct, { holdDiem: 13 as MicroDiem }))
      const result = await clearOf(adm.attemptId, 2 ** 60)
      expect(result).toMatchObject({ charged: 11, burn: 13, disputed: Number.MAX_SAFE_INTEGER - 13 } as never)
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    })

    test('burn is capped at what the offer has left: it never burns more than it posted', async () => {
      const o = await postOffer(fx, 50, 2_000)
      const acct = await seedAccount(fx, 1_000_000)
      const adm = admitted(await admitFor(fx, acct, { holdDiem: 2_000 as MicroDiem }))
      const result = await clearOf(adm.attemptId, 5_000)
      expect(result.burn).toBe(2_000 as never)
      expect((await offer(o)).burned).toBe('2000')
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    })

    test('records the supplier key balance it was given', async () => {
      const o = await postOffer(fx, 50, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      const adm = admitted(await admitFor(fx, acct))
      await clearOf(adm.attemptId, 100, {
        upstreamBalanceAfter: 77_000 as MicroDiem,
        upstreamGen: adm.upstreamGen,
      })
      expect((await offer(o)).balance).toBe('77000')
    })

    test('an unknown or released attempt cannot be cleared', async () => {
      await postOffer(fx, 50, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      await expect(clearOf('nope', 1)).rejects.toBeInstanceOf(ClearingError)
      const adm = admitted(await admitFor(fx, acct))
      await release(fx.store, fx.keys, {
        attemptId: adm.attemptId,
        errorCode: 'x',
        cooldownMs: 0,
        upstreamBalance: null,
      })
      await expect(clearOf(adm.attemptId, 1)).rejects.toThrow('released')
    })
  })

  describe('release, renew, reap', () => {
    test('release returns everything, once, and can cool the offer down', async () => {
      const o = await postOffer(fx, 50, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      const adm = admitted(await admitFor(fx, acct))
      const args = {
        attemptId: adm.attemptId,
        errorCode: 'upstream_503',
        cooldownMs: 30_000,
        upstreamBalance: null,
      }
      expect(await release(fx.store, fx.keys, args)).toBe(true)
      expect(await release(fx.store, fx.keys, args)).toBe(false)
      const a = await account(acct)
      expect([a.confirmed, a.held, a.spent]).toEqual(['1000000', '0', '0'])
      expect(Number((await offer(o)).cooldownUntil)).toBeGreaterThan(Date.now())
      expect([a.inflight, a['inflight:key-1']]).toEqual(['0', '0'])
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    })

    test('reap returns expired leases; renew keeps a live one', async () => {
      await postOffer(fx, 50, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      // Renewed before the short lease is admitted: an admit reaps expired leases, so none may follow
      // the short one, and a renew finds a lease that expired but is not yet reaped still there.
      const renewed = admitted(await admitFor(fx, acct, { leaseMs: 100 }))
      expect(await renewLease(fx.store, fx.keys, renewed.attemptId, 60_000)).toBe(true)
      const short = admitted(await admitFor(fx, acct, { leaseMs: 100 }))
      await untilRedisPasses(fx.store, short.leaseDeadline)
      expect(await reapExpired(fx.store, fx.keys)).toBe(1)
      expect(await renewLease(fx.store, fx.keys, short.attemptId, 60_000)).toBe(false)
      expect((await attemptRecord(fx.store, fx.keys.attempt(short.attemptId))).state).toBe('reaped')
      expect(Number((await account(acct)).held)).toBe(renewed.holdUsdc as number)
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    })

    test('renew never pulls a longer lease back (a video job holds its own time to live)', async () => {
      await postOffer(fx, 50, 5_000_000)
      const acct = await seedAccount(fx, 1_000_000)
      const adm = admitted(await admitFor(fx, acct, { leaseMs: 3_600_000 }))
      const before = Number(await fx.store.zscore(fx.keys.leases, adm.attemptId))
      expect(await renewLease(fx.store, fx.keys, adm.attemptId, 30_000)).toBe(true)
      expect(Number(await fx.store.zscore(fx.keys.leases, adm.attemptId))).toBe(before)
      expect(await renewLease(fx.store, fx.keys, adm.attemptId, 7_200_000)).toBe(true)
      expect(Number(await fx.store.zscore(fx.keys.leases, adm.attemptId))).toBeGreaterThan(before)
    })

    test('a late clear after a reap charges what the balance can pay; the supplier earns only that', async () => {
      const o = await postOffer(fx, 50, 5_000_000)
      const acct = await seedAccount(fx, 1_000)
      const adm = admitted(await admitFor(fx, acct, { leaseMs: 50, holdDiem: 1_800 as MicroDiem }))
      await untilRedisPasses(fx.store, adm.leaseDeadline)
      expect(await reapExpired(fx.store, fx.keys)).toBe(1)
      // The buyer spends meanwhile: another request clears 400, so only 600 of the 1,000 is left.
      const other = admitted(await admitFor(fx, acct, { holdDiem: 800 as MicroDiem }))
      expect((await clearOf(other.attemptId, 800, { feeBps: 1_000 })).charged).toBe(400 as never)
      const late = await clearOf(adm.attemptId, 1_800, { feeBps: 1_000 })
      expect(late.cost).toBe(900 as never)
      expect(late.charged).toBe(600 as never)
      expect(late.writtenOff).toBe(300 as never)
      expect((await account(acct)).confirmed).toBe('0')
      // Earned = charged - fee on both clears: 400 - 40 and 600 - 60; nothing for the written-off 300.
      expect(await offer(o)).toMatchObject({ earned: String(360 + 540), fees: String(40 + 60) })
      expect(await listWriteOffs(fx.store, fx.keys)).toEqual([
        expect.objectContaining({ attemptId: adm.attemptId, amount: 300, accountId: acct, offerId: o }),
      ])
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
      // A write-off that no late clear made is found.
      await setAttemptValue(fx.store, fx.keys.attempt(other.attemptId), 'writtenOff', '5')
      await fx.store.hincrby(fx.keys.account(acct), 'writtenOff', 5)
      expect(await auditMarket(fx.store, fx.keys)).toEqual([
        {
          subject: `attempt ${other.attemptId}`,
          problem: 'written off 5 without a late clear (a reaped lease or a lost admission)',
        },
        { subject: 'market', problem: "accounts' written off 305 != the write-off list's 300" },
      ])
    })

    for (const shape of ['packed', 'from before the packing'] as const) {
      test(`a release that ends a reaped attempt for good leaves no late clear to charge it (${shape})`, async () => {
        const o = await postOffer(fx, 50, 5_000_000)
        const acct = await seedAccount(fx, 1_000_000)
        const ended = admitted(await admitFor(fx, acct, { leaseMs: 50, holdDiem: 1_800 as MicroDiem }))
        const left = admitted(await admitFor(fx, acct, { leaseMs: 50, holdDiem: 1_800 as MicroDiem }))
        await untilRedisPasses(fx.store, Math.max(ended.leaseDeadline, left.leaseDeadline))
        expect(await reapExpired(fx.store, fx.keys)).toBe(2)
        const key = fx.keys.attempt(ended.attemptId)
        if (shape !== 'packed') {
          const fields = await attemptRecord(fx.store, key)
          await fx.store.del(key)
          await fx.store.hset(key, fields)
        }
        const reaped = await attemptRecord(fx.store, key)
        const before = await account(acct)
        const ask = { errorCode: 'video_expired', cooldownMs: 0, upstreamBalance: null, final: true }
        // Nothing moves: the reaper gave the hold back already.
        expect(
          await release(fx.store, fx.keys, { attemptId: ended.attemptId, ...ask, endReaped: true }),
        ).toBe(false)
        expect(await release(fx.store, fx.keys, { attemptId: left.attemptId, ...ask })).toBe(false)
        expect(await account(acct)).toEqual(before)
        expect(await attemptRecord(fx.store, key)).toMatchObject({
          state: 'released',
          errorCode: 'video_expired',
          final: '1',
          endedAt: reaped.endedAt,
        })
        expect((await attemptRecord(fx.store, fx.keys.attempt(left.attemptId))).state).toBe('reaped')

        await expect(clearOf(ended.attemptId, 1_800)).rejects.toMatchObject({ reason: 'released' })
        expect(await account(acct)).toEqual(before)
        // Without being asked to, a release leaves a reaped attempt to its late clear.
        expect((await clearOf(left.attemptId, 1_800)).charged).toBe(900 as never)
        expect(Number((await account(acct)).confirmed)).toBe(Number(before.confirmed) - 900)
        expect(Number((await offer(o)).earned)).toBe(900)
        expect(await auditMarket(fx.store, fx.keys)).toEqual([])
      })
    }

    test('admit reaps expired leases before it decides', async () => {
      await postOffer(fx, 50, 5_000_000, { maxInFlight: 1 })
      const acct = await seedAccount(fx, 1_000_000)
      const expiring = admitted(await admitFor(fx, acct, { leaseMs: 30 }))
      await untilRedisPasses(fx.store, expiring.leaseDeadline)
      admitted(await admitFor(fx, acct))
    })

    // What an expired lease holds, and the request it would refuse until reaped.
    const heldByLease = [
      { what: 'the key in-flight cap', balance: 1_000_000, ask: { keyCap: 1 } },
      { what: 'the wallet in-flight cap', balance: 1_000_000, ask: { accountCap: 1 } },
      // One hold of 1,000 micro-DIEM at 50 cents is 500 micro-USDC.
      { what: 'the balance', balance: 500, ask: {} },
      // The offer's 4,999,000 routable hold one request of 4,000,000 at a time.
      { what: "the offer's capacity", balance: 10_000_000, ask: { holdDiem: 4_000_000 as MicroDiem } },
    ]
    for (const { what, balance, ask } of heldByLease) {
      test(`an admit refused for ${what} an expired lease holds reaps it and is admitted`, async () => {
        await postOffer(fx, 50, 5_000_000, { maxInFlight: 5 })
        const acct = await seedAccount(fx, balance)
        const expiring = admitted(await admitFor(fx, acct, { ...ask, leaseMs: 30 }))
        await untilRedisPasses(fx.store, expiring.leaseDeadline)
        admitted(await admitFor(fx, acct, ask))
        expect((await attemptRecord(fx.store, fx.keys.attempt(expiring.attemptId))).state).toBe('reaped')
        expect(await auditMarket(fx.store, fx.keys)).toEqual([])
      })
    }

    test('an admit that needs nothing an expired lease holds leaves it to the reaper', async () => {
      await postOffer(fx, 50, 5_000_000, { maxInFlight: 5 })
      const acct = await seedAccount(fx, 1_000_000)
      const expiring = admitted(await admitFor(fx, acct, { leaseMs: 30 }))
      await untilRedisPasses(fx.store, expiring.leaseDeadline)
      admitted(await admitFor(fx, acct))
      expect(await fx.store.zscore(fx.keys.leases, expiring.attemptId)).not.toBeNull()
      expect(await reapExpired(fx.store, fx.keys)).toBe(1)
      expect((await attemptRecord(fx.store, fx.keys.attempt(expiring.attemptId))).state).toBe('reaped')
    })
  })

  describe('under concurrency', () => {
    test('1,000 concurrent admits against a balance that covers 100 admit exactly 100', async () => {
      await postOffer(fx, 50, 1_000_000_000, { maxInFlight: 100_000 })
      const acct = await seedAccount(fx, 100 * 500)
      const results = await Promise.all(
        Array.from({ length: 1_000 }, () => admitFor(fx, acct, { holdDiem: 1_000 as MicroDiem })),
      )
      expect(results.filter((r) => r.code === AdmitCode.Admitted)).toHaveLength(100)
      expect(results.filter((r) => r.code === AdmitCode.InsufficientBalance)).toHaveLength(900)
      const a = await account(acct)
      expect([a.confirmed, a.held]).toEqual(['0', '50000'])
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    })

    test('concurrent clears and replays of the same attempts charge each once', async () => {
      await postOffer(fx, 40, 1_000_000_000, { maxInFlight: 100_000 })
      const acct = await seedAccount(fx, 10_000_000)
      const admissions = (await Promise.all(Array.from({ length: 50 }, () => admitFor(fx, acct)))).map(
        admitted,
      )
      await Promise.all(
        admissions.flatMap((adm) => [clearOf(adm.attemptId, 777), clearOf(adm.attemptId, 777)]),
      )
      expect((await account(acct)).spent).toBe(String(50 * Math.ceil((777 * 40) / 100)))
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    })
  })
})
