// What admit reads of the ladder, counted by the server (INFO commandstats): a refusal that must
// count every offer reads the ladder's first page and then the rest, in one call more than a ladder
// of one offer takes, however long the ladder is.
import { describe, expect, test } from 'bun:test'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import {
  admitFor,
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

/** ZRANGEBYSCOREs the server ran during `run` (the ladder's reads and the inline reap's). */
async function rangeReads(run: () => Promise<unknown>): Promise<number> {
  const calls = async () =>
    Number(/cmdstat_zrangebyscore:calls=(\d+)/.exec(String(await fx.store.info('commandstats')))?.[1] ?? 0)
  const before = await calls()
  await run()
  return (await calls()) - before
}

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
})
