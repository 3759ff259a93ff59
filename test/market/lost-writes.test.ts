// What a Redis failover or restart can lose of a paid request, and how it is got back, against a
// real Redis. The loss is made as a promoted replica that never got the writes would show it:
// every key of the market put back as it was before them (test/helpers/saved-keys.ts).
// - An admission lost: its clear writes the admission from what admit answered and clears it late
//   (lua/clear.lua): the buyer pays what it is told, at most what its balance and key limit allow,
//   the supplier earns what was paid, the rest is written off, and a replay changes nothing.
// - A clear lost: the clear journal (src/market/clear-journal.ts) sends the clears of its window
//   again when a connection closes; one the store lost is charged, one it kept moves nothing twice.
import { describe, expect, test } from 'bun:test'
import { createLogger } from '../../src/logger.ts'
import { auditMarket } from '../../src/market/audit.ts'
import { ClearJournal, type JournalOptions } from '../../src/market/clear-journal.ts'
import { ClearingError } from '../../src/market/clearing.ts'
import { type AttemptRef, type ClearArgs, marketSteps } from '../../src/market/steps.ts'
import { metrics } from '../../src/metrics/gateway-metrics.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { createStore } from '../../src/redis/store.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import {
  admitFor,
  admitted,
  clearFor,
  freshMarketPerTest,
  type MarketFixture,
  meteredClear,
  postOffer,
  scriptForms,
  seedAccount,
} from '../helpers/market.ts'
import { saveKeys } from '../helpers/saved-keys.ts'
import { snapshotKeys, testPrefix } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let fx: MarketFixture

/** An offer at 50 cents, a buyer with `confirmed`, and one admission the store then loses. */
async function lostAdmission(confirmed = 1_000_000) {
  const offerId = await postOffer(fx, 50, 5_000_000)
  const accountId = await seedAccount(fx, confirmed)
  const before = await saveKeys(fx.store, fx.keys.prefix)
  const admission = admitted(await admitFor(fx, accountId))
  await before.restore()
  return { offerId, accountId, admission }
}

const steps = () => marketSteps(fx.store, fx.keys)
const burn = (diem: number): ClearArgs => {
  const { attemptId: _, ...rest } = meteredClear('', diem, { feeBps: 100 })
  return rest
}

/**
 * A journal with a clock the test moves, and a clear as the request path makes one: acknowledged,
 * then kept, on the masters `mastersOf` names (its slot named by its account id).
 */
function journalOn(options: JournalOptions = {}, mastersOf: (attempt: AttemptRef) => string[] = () => []) {
  const clock = { now: 1_000_000 }
  const on = steps()
  const journal = new ClearJournal((attempt, req) => on.clear(attempt, req), createLogger('silent'), {
    windowMs: 5_000,
    now: () => clock.now,
    ...options,
  })
  const clear = async (attempt: AttemptRef, req: ClearArgs) => {
    const clearing = await on.clear(attempt, req)
    journal.record(attempt, req, { masters: mastersOf(attempt), slots: [attempt.accountId] })
    return clearing
  }
  return { journal, clear, clock }
}

/** An admission cleared through `clear`, whose clear the store then loses (its attempt admitted again). */
async function lostClear(
  clear: (attempt: AttemptRef, req: ClearArgs) => Promise<unknown>,
  accountId: string,
) {
  const admission = admitted(await admitFor(fx, accountId))
  const before = await saveKeys(fx.store, fx.keys.prefix)
  await clear(admission, burn(1_000))
  await before.restore()
  return admission
}

const spent = async (accountId: string) => Number(await fx.store.hget(fx.keys.account(accountId), 'spent'))

describe.each(scriptForms())('as %s', (form) => {
  freshMarketPerTest((each) => {
    fx = each
  }, form)

  test('the clear writes the admission from what admit answered and charges it, once', async () => {
    const { offerId, accountId, admission } = await lostAdmission()
    expect(await fx.store.exists(fx.keys.attempt(admission.attemptId))).toBe(0)

    const cleared = await steps().clear(admission, burn(1_000))
    // 1,000 micro-DIEM at 50 cents: 500 micro-USDC, 1% of it the fee.
    expect(cleared).toMatchObject({ charged: 500, cost: 500, burn: 1_000, writtenOff: 0, fee: 5 })
    expect(cleared).toMatchObject({ admissionLost: true, replay: false, confirmedAfter: 999_500 })
    const account = await fx.store.hgetall(fx.keys.account(accountId))
    expect(account).toMatchObject({ confirmed: '999500', spent: '500', 'spent:key-1': '500', held: '0' })
    expect(await fx.store.hgetall(fx.keys.offer(offerId))).toMatchObject({
      burned: '1000',
      earned: '495',
      fees: '5',
      held: '0',
      inflight: '0',
    })
    expect(await attemptRecord(fx.store, fx.keys.attempt(admission.attemptId))).toMatchObject({
      state: 'cleared',
      lateClear: 'lost',
      accountId,
      keyId: 'key-1',
      offerId,
      askCents: '50',
      requestId: 'req_test',
      costUsdc: '500',
      model: 'llama-3.3-70b',
    })
    expect(await fx.store.pttl(fx.keys.attempt(admission.attemptId))).toBeGreaterThan(0)
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])

    const again = await steps().clear(admission, burn(1_000))
    expect(again).toMatchObject({ charged: 500, replay: true, admissionLost: false })
    expect((await fx.store.hgetall(fx.keys.account(accountId))).spent).toBe('500')
    expect((await fx.store.hgetall(fx.keys.offer(offerId))).earned).toBe('495')
  })

  test('clears of one lost admission sent at once (its request and a replay) charge it once', async () => {
    const { offerId, accountId, admission } = await lostAdmission()
    const clearings = await Promise.all(
      Array.from({ length: 8 }, () => steps().clear(admission, burn(1_000))),
    )
    expect(clearings.map((c) => c.charged as number)).toEqual(Array(8).fill(500))
    expect(clearings.filter((c) => c.admissionLost)).toHaveLength(1)
    expect(clearings.filter((c) => c.replay)).toHaveLength(7)
    expect((await fx.store.hgetall(fx.keys.account(accountId))).spent).toBe('500')
    expect((await fx.store.hgetall(fx.keys.offer(offerId))).earned).toBe('495')
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })

  test('without what admit answered, the clear is refused and writes nothing', async () => {
    const { admission } = await lostAdmission()
    const before = await snapshotKeys(fx.store, fx.keys.prefix)
    const error = await clearFor(fx, admission.attemptId, 1_000).catch((e) => e)
    expect(error).toBeInstanceOf(ClearingError)
    expect(error.reason).toBe('unknown_attempt')
    expect(await snapshotKeys(fx.store, fx.keys.prefix)).toEqual(before)
  })

  test.each(['account', 'offer'] as const)(
    'no ghost %s: an admission whose %s the store lost too is refused, nothing written',
    async (gone) => {
      const { accountId, offerId, admission } = await lostAdmission()
      await fx.store.del(gone === 'account' ? fx.keys.account(accountId) : fx.keys.offer(offerId))
      const before = await snapshotKeys(fx.store, fx.keys.prefix)
      expect(
        (
          await steps()
            .clear(admission, burn(1_000))
            .catch((e) => e)
        ).reason,
      ).toBe('unknown_attempt')
      expect(await snapshotKeys(fx.store, fx.keys.prefix)).toEqual(before)
    },
  )

  test("what the key's limit has not left is written off, never charged", async () => {
    const { offerId, accountId, admission } = await lostAdmission()
    await fx.store.hset(fx.keys.account(accountId), 'limit:key-1', 300)
    const cleared = await steps().clear(admission, burn(1_000))
    expect(cleared).toMatchObject({ charged: 300, cost: 500, writtenOff: 200, admissionLost: true })
    expect(await fx.store.hgetall(fx.keys.account(accountId))).toMatchObject({
      confirmed: '999700',
      'spent:key-1': '300',
      writtenOff: '200',
    })
    expect((await fx.store.hgetall(fx.keys.offer(offerId))).earned).toBe(String(300 - 3))
    expect(await fx.store.hget(fx.keys.writeoffs, admission.attemptId)).toBe('200')
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })

  test('a burn past the hold is billed at the hold, the rest disputed', async () => {
    const { admission } = await lostAdmission()
    const cleared = await steps().clear(admission, burn(admission.holdDiem + 400))
    expect(cleared).toMatchObject({ burn: admission.holdDiem, disputed: 400, admissionLost: true })
    expect(cleared.charged as number).toBe(Math.ceil((admission.holdDiem * 50) / 100))
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })

  test('a bounded burn is billed at most, the rest disputed; the admission read after it', async () => {
    const { offerId, admission } = await lostAdmission()
    const cleared = await steps().clear(admission, { ...burn(1_000), boundedBurn: 600 as MicroDiem })
    expect(cleared).toMatchObject({ burn: 600, disputed: 400, admissionLost: true })
    expect(cleared.charged as number).toBe(300)
    expect((await fx.store.hgetall(fx.keys.offer(offerId))).disputed).toBe('400')
    expect((await attemptRecord(fx.store, fx.keys.attempt(admission.attemptId))).requestId).toBe(
      admission.requestId,
    )
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })

  test('an admission the store still has clears as ever: nothing late', async () => {
    await postOffer(fx, 50, 5_000_000)
    const accountId = await seedAccount(fx, 1_000_000)
    const admission = admitted(await admitFor(fx, accountId, { holdDiem: 2_000 as MicroDiem }))
    const cleared = await steps().clear(admission, burn(1_000))
    expect(cleared).toMatchObject({ charged: 500, admissionLost: false })
    expect((await attemptRecord(fx.store, fx.keys.attempt(admission.attemptId))).lateClear).toBeUndefined()
  })

  describe('the clear journal', () => {
    test('a clear the store lost is charged when the journal sends it again; one it kept moves nothing twice', async () => {
      await postOffer(fx, 50, 5_000_000)
      const accountId = await seedAccount(fx, 1_000_000)
      const { journal, clear } = journalOn()
      await clear(admitted(await admitFor(fx, accountId)), burn(600))
      expect(await spent(accountId)).toBe(300)
      await lostClear(clear, accountId)
      expect(await spent(accountId)).toBe(300)

      journal.lost()
      await journal.settled
      expect(await spent(accountId)).toBe(800)
      expect(await fx.store.hget(fx.keys.account(accountId), 'held')).toBe('0')
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
      // Lost again: both are replays now.
      journal.lost()
      await journal.settled
      expect(await spent(accountId)).toBe(800)
    })

    test('a clear lost with its admission is charged from the admission the journal kept', async () => {
      const { offerId, accountId, admission } = await lostAdmission()
      const { journal, clear } = journalOn()
      // Cleared (late, its admission already gone), then that clear lost as well.
      const before = await saveKeys(fx.store, fx.keys.prefix)
      await clear(admission, burn(1_000))
      await before.restore()
      expect(await spent(accountId)).toBe(0)

      journal.lost()
      await journal.settled
      expect(await spent(accountId)).toBe(500)
      expect((await fx.store.hgetall(fx.keys.offer(offerId))).earned).toBe('495')
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    })

    test.each(['older than the window', 'after the journal stopped'])(
      'a clear is not sent again %s',
      async (when) => {
        await postOffer(fx, 50, 5_000_000)
        const accountId = await seedAccount(fx, 1_000_000)
        const { journal, clear, clock } = journalOn()
        await lostClear(clear, accountId)
        if (when === 'older than the window') clock.now += 5_001
        else await journal.stop()
        journal.lost()
        await journal.settled
        expect(await spent(accountId)).toBe(0)
        expect(await fx.store.hget(fx.keys.account(accountId), 'held')).not.toBe('0')
      },
    )

    test("past the window a clear is kept until its master's replicas have it, and past the longest keep it is forgotten and counted", async () => {
      await postOffer(fx, 50, 5_000_000)
      const accountId = await seedAccount(fx, 1_000_000)
      const replicas = { before: 0 }
      const { journal, clear, clock } = journalOn({
        replicatedBefore: () => replicas.before,
        keepUnreplicatedMs: 30_000,
      })
      // Past the window, and no replica has it: sent again.
      await lostClear(clear, accountId)
      clock.now += 5_001
      journal.lost()
      await journal.settled
      expect(await spent(accountId)).toBe(500)

      // The replicas acknowledged it (the loss below is made after, as no failover could): forgotten.
      await lostClear(clear, accountId)
      const lostAt = clock.now
      clock.now += 5_001
      expect(journal.held).toBe(2)
      replicas.before = lostAt + 1
      expect(journal.held).toBe(0)
      journal.lost()
      await journal.settled
      expect(journal.held).toBe(0)
      expect(await spent(accountId)).toBe(500)

      // Unacknowledged past the longest keep: forgotten, and counted.
      const counted = unreplicatedCount()
      await lostClear(clear, accountId)
      clock.now += 30_001
      journal.lost()
      await journal.settled
      expect(await spent(accountId)).toBe(500)
      expect(unreplicatedCount()).toBe(counted + 1)
    })

    test('each master keeps what it acknowledged: one whose replicas lag keeps its own clears alone, and a connection lost to one sends again only its clears and those of no known master', async () => {
      await postOffer(fx, 50, 5_000_000)
      const onA = await seedAccount(fx, 1_000_000)
      const onB = await seedAccount(fx, 1_000_000)
      const onBoth = await seedAccount(fx, 1_000_000)
      const unknown = await seedAccount(fx, 1_000_000)
      // What each master's replicas have; '' is what every master's have.
      const replicas: Record<string, number> = { a: 0, b: 0, '': 0 }
      const masters: Record<string, string[]> = {
        [onA]: ['a'],
        [onB]: ['b'],
        [onBoth]: ['a', 'b'],
        [unknown]: [],
      }
      const { journal, clear, clock } = journalOn(
        { replicatedBefore: (master) => replicas[master]! },
        (attempt) => masters[attempt.accountId]!,
      )
      for (const accountId of [onA, onB, onBoth, unknown]) await lostClear(clear, accountId)
      expect(journal.held).toBe(4)

      // Lost on b: b's own, the one on both, and the one of no known master; a's stays lost.
      journal.lost('b')
      await journal.settled
      expect(await spent(onA)).toBe(0)
      expect(await spent(onB)).toBe(500)
      expect(await spent(onBoth)).toBe(500)
      expect(await spent(unknown)).toBe(500)

      // Past the window b's replicas have everything, a's nothing: a keeps its own and the one on
      // both; b keeps none of its own, and the one of no master waits for every master's.
      clock.now += 5_001
      replicas.b = clock.now
      expect(journal.held).toBe(3)
      // How long each master's oldest unacknowledged clear has waited: a's, 5 s.
      expect(journal.unreplicatedAges()).toEqual([
        ['a', 5.001],
        ['', 5.001],
      ])
      replicas[''] = clock.now
      expect(journal.held).toBe(2)
      expect(journal.unreplicatedAges()).toEqual([['a', 5.001]])
      journal.lost('a')
      await journal.settled
      expect(await spent(onA)).toBe(500)
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])

      // Past the longest keep, unacknowledged by a: forgotten, each counted once.
      const counted = unreplicatedCount()
      clock.now += 30_000
      expect(journal.held).toBe(0)
      expect(unreplicatedCount()).toBe(counted + 2)
    })

    test('a clear whose slot moved to another master since is sent again when that master is lost', async () => {
      await postOffer(fx, 50, 5_000_000)
      const accountId = await seedAccount(fx, 1_000_000)
      const serving: Record<string, string> = { [accountId]: 'a' }
      const { journal, clear } = journalOn({ masterOf: (slot) => serving[slot] }, () => ['a'])
      await lostClear(clear, accountId)
      journal.lost('b')
      await journal.settled
      expect(await spent(accountId)).toBe(0)
      // The slot moved to b, its keys with it: b's loss can take the clear a acknowledged.
      serving[accountId] = 'b'
      journal.lost('b')
      await journal.settled
      expect(await spent(accountId)).toBe(500)
    })

    test('beyond the most clears kept in all, the oldest of any master is forgotten, once', async () => {
      await postOffer(fx, 50, 5_000_000)
      const onA = await seedAccount(fx, 1_000_000)
      const onBoth = await seedAccount(fx, 1_000_000)
      const masters: Record<string, string[]> = { [onA]: ['a'], [onBoth]: ['a', 'b'] }
      const { journal, clear, clock } = journalOn(
        { replicatedBefore: () => 0, keepMaxClears: 2 },
        (attempt) => masters[attempt.accountId]!,
      )
      const counted = unreplicatedCount()
      // The oldest, on both masters, then two on a: it goes from both, counted once.
      await lostClear(clear, onBoth)
      clock.now += 1
      await lostClear(clear, onA)
      clock.now += 1
      await lostClear(clear, onA)
      expect(journal.held).toBe(2)
      expect(unreplicatedCount()).toBe(counted + 1)
      journal.lost('b')
      await journal.settled
      expect(await spent(onBoth)).toBe(0)
      journal.lost('a')
      await journal.settled
      expect(await spent(onA)).toBe(1_000)
    })

    test('beyond the most clears kept the oldest are forgotten, those unacknowledged counted', async () => {
      await postOffer(fx, 50, 5_000_000)
      const accountId = await seedAccount(fx, 1_000_000)
      const replicas = { before: 0 }
      const { journal, clear, clock } = journalOn({
        replicatedBefore: () => replicas.before,
        keepMaxClears: 2,
      })
      const counted = unreplicatedCount()
      // Four lost clears, a millisecond apart, the first acknowledged by the replicas: the journal
      // keeps the last two, and of the two it forgets the unacknowledged one is counted.
      for (let i = 0; i < 4; i++) {
        await lostClear(clear, accountId)
        if (i === 0) replicas.before = clock.now + 1
        clock.now += 1
      }
      expect(journal.held).toBe(2)
      expect(unreplicatedCount()).toBe(counted + 1)
      journal.lost()
      await journal.settled
      expect(await spent(accountId)).toBe(1_000)
    })
  })
})

function unreplicatedCount(): number {
  return Number(
    metrics.unreplicatedClears
      .render()
      .find((line) => !line.startsWith('#'))
      ?.split(' ')[1] ?? 0,
  )
}

test('a journal stopped while its replay waits for a store that is away stops waiting', async () => {
  // A store on port 9 (discard), where nothing listens: every clear fails for want of Redis.
  const away = createStore('redis://127.0.0.1:9', { failFast: true, name: 'svc-test-away' })
  const onAway = marketSteps(away, keyspace(testPrefix()))
  let tries = 0
  const journal = new ClearJournal((attempt, req) => {
    tries++
    return onAway.clear(attempt, req)
  }, createLogger('silent'))
  const { attemptId: _, ...req } = meteredClear('', 1_000)
  journal.record({ attemptId: 'a.1', accountId: 'acct', offerId: 'offer', model: 'm' }, req)
  journal.lost()
  await until(() => tries >= 2)
  // Its waits add up to a minute: this test's time limit, well under it, is the hang guard.
  await journal.stop()
  const triedAtStop = tries
  await journal.settled
  expect(tries).toBe(triedAtStop)
  away.close()
}, 20_000)
