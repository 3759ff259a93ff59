// What admit reads of the ladder, counted by the server (INFO commandstats): a refusal that must
// count every offer reads the ladder's first page and then the rest, in one call more than a ladder
// of one offer takes, however long the ladder is; a refusal while every offer is at its cap reads
// the same calls and offers however many there are; an admit reads the same offers however many
// too small to route (dry) stand cheaper.
import { describe, expect, test } from 'bun:test'
import { AdmitCode } from '../../src/redis/result-codes.ts'
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
import { ownRedis } from '../helpers/stack.ts'

// Command counts are the whole server's: a server of this file's own.
await ownRedis()

let fx: MarketFixture

/** How many times the server ran `command` during `run`. */
async function callsOf(command: string, run: () => Promise<unknown>): Promise<number> {
  const calls = async () =>
    Number(
      new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(String(await fx.store.info('commandstats')))?.[1] ??
        0,
    )
  const before = await calls()
  await run()
  return (await calls()) - before
}
/** ZRANGEBYSCOREs the server ran during `run` (the ladder's reads and the inline reap's). */
const rangeReads = (run: () => Promise<unknown>) => callsOf('zrangebyscore', run)

describe.each(scriptForms())('as %s', (form) => {
  freshMarketPerTest((each) => {
    fx = each
  }, form)

  test('a refusal that counts every offer reads the ladder in one call more, whatever its length', async () => {
    const acct = await seedAccount(fx, 1_000_000)
    // Each too small for the request's 1,000 micro-DIEM hold.
    await postOffer(fx, 40, 500)
    const refused = async () => expect((await admitFor(fx, acct)).code).toBe(AdmitCode.InsufficientRoutable)
    const one = await rangeReads(refused)
    for (let i = 0; i < 40; i++) await postOffer(fx, 40, 500)
    expect(await rangeReads(refused)).toBe(one + 1)
  })

  test('an admit reads the same offers however many dry ones stand cheaper', async () => {
    // The market's minimum: an offer with less left than 10,000 micro-DIEM stands aside.
    await fx.store.hset(fx.keys.market, 'minRoutable', 10_000)
    const acct = await seedAccount(fx, 1_000_000_000)
    await postOffer(fx, 40, 5_000_000)
    const reads = () =>
      callsOf('hmget', async () => {
        const taken = admitted(await admitFor(fx, acct))
        await clearFor(fx, taken.attemptId, 500)
      })
    const none = await reads()
    // Cheaper than the one the admit takes, each too small to route: posted so, or left so by a burn.
    for (let i = 0; i < 250; i++) await postOffer(fx, 30, 500)
    for (let i = 0; i < 250; i++) {
      const worn = await postOffer(fx, 30, 20_000)
      await fx.store.hset(fx.keys.offer(worn), 'burned', 19_500)
    }
    // The worn ones were posted with room: the next admits find them dry and set them aside, once.
    for (let i = 0; i < 2; i++) expect(admitted(await admitFor(fx, acct)).askCents).toBe(40)
    expect(await reads()).toBe(none)
    expect(await fx.store.zcard(fx.keys.dry)).toBe(500)
  })

  test('a busy refusal reads the same few offers however many stand at their cap', async () => {
    const acct = await seedAccount(fx, 1_000_000)
    const fill = async (offers: number) => {
      for (let i = 0; i < offers; i++) await postOffer(fx, 40, 5_000_000, { maxInFlight: 1 })
      for (let i = 0; i < offers; i++) expect(admitted(await admitFor(fx, acct)).offerId).toBeString()
    }
    const busy = async () => expect((await admitFor(fx, acct)).code).toBe(AdmitCode.KeysBusy)
    const reads = async () => {
      let ranges = 0
      const offers = await callsOf('hmget', async () => {
        ranges = await rangeReads(busy)
      })
      return { ranges, offers }
    }
    await fill(1)
    const one = await reads()
    await fill(40)
    expect(await reads()).toEqual(one)
  })
})
