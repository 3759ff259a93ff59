// set-key-limit on a key with a budget period: a change that starts the key's new period is a new
// budget (its key.budget.100 may fire again), and a clock behind the period last counted never
// rolls the period back, as admit never does, so what the key spent is never forgotten; a key minted
// from it carves from what that period left.
import { expect, test } from 'bun:test'
import { generateApiKey, MAX_ACTIVE_API_KEYS } from '../../src/accounts/api-keys.ts'
import { periodStart } from '../../src/accounts/budget-periods.ts'
import { ACCOUNT_TABLE } from '../../src/redis/keys.ts'
import { AccountCode } from '../../src/redis/result-codes.ts'
import { runScript } from '../../src/redis/scripts.ts'
import {
  admitFor,
  admitted,
  clearFor,
  freshMarketPerTest,
  type MarketFixture,
  postOffer,
  seedAccount,
} from '../helpers/market.ts'

let fx: MarketFixture
freshMarketPerTest((fresh) => {
  fx = fresh
})
const KEY = 'key-1'
const HOLD = 500
const LIMIT = 5 * HOLD
const DAY = Date.parse('2026-03-10T12:00:00.000Z')
const NEXT_DAY = DAY + 86_400_000

async function types(acct: string) {
  const entries = await fx.store.xrange(fx.keys.webhookEvents(`acct:${acct}`), '-', '+')
  return entries.map(([, f]) => f[f.indexOf('type') + 1])
}

test('renaming a daily key after its day ended does not swallow the next day key.budget.100', async () => {
  await postOffer(fx, 50, 1_000_000_000, { maxInFlight: 100_000 })
  const acct = await seedAccount(fx, 1_000_000_000)
  await fx.store.hset(fx.keys.account(acct), `limit:${KEY}`, LIMIT, `reset:${KEY}`, 'daily')
  await fx.store.hset(fx.keys.webhooks(`acct:${acct}`), 'ep-1', '{}')
  await fx.store.hset(fx.keys.webhookHooks(`acct:${acct}`), 't:key.budget.80', 1, 't:key.budget.100', 1)
  await fx.store.hset(fx.keys.account(acct), 'hooks', 1)
  await fx.store.hset(fx.keys.accountKeys(acct), KEY, 'digest-1')
  const spend = async (now: number) =>
    clearFor(fx, admitted(await admitFor(fx, acct, { now })).attemptId, 1_000)

  for (let i = 0; i < 5; i++) await spend(DAY)
  expect(await types(acct)).toEqual(['key.budget.80', 'key.budget.100'])
  // Next day, before any request: the owner renames the key (PATCH {name}).
  const r = (await runScript(
    fx.store,
    'setKeyLimit',
    [fx.keys.account(acct), fx.keys.accountKeys(acct), fx.keys.apiKey('digest-1')],
    {
      keyId: KEY,
      keyDigest: 'digest-1',
      limit: '',
      name: 'renamed',
      callerKeyId: '',
      limitReset: '',
      now: NEXT_DAY,
    },
  )) as unknown[]
  expect(Number(r[0])).toBe(1)
  for (let i = 0; i < 5; i++) await spend(NEXT_DAY)
  expect(await types(acct)).toEqual(['key.budget.80', 'key.budget.100', 'key.budget.80', 'key.budget.100'])
})

test('set-key-limit on a clock behind the period last counted does not roll the period back (admit never does)', async () => {
  await postOffer(fx, 50, 1_000_000_000, { maxInFlight: 100_000 })
  const acct = await seedAccount(fx, 1_000_000_000)
  await fx.store.hset(fx.keys.account(acct), `limit:${KEY}`, LIMIT, `reset:${KEY}`, 'daily')
  await fx.store.hset(fx.keys.accountKeys(acct), KEY, 'digest-1')
  const spend = async (now: number) =>
    clearFor(fx, admitted(await admitFor(fx, acct, { now })).attemptId, 1_000)
  // The key spends its whole budget on NEXT_DAY...
  for (let i = 0; i < 5; i++) await spend(NEXT_DAY)
  expect((await admitFor(fx, acct, { now: NEXT_DAY })).code).toBe(-12)
  // ...then (failover to a replica whose clock lags into DAY) the owner renames the key.
  await runScript(
    fx.store,
    'setKeyLimit',
    [fx.keys.account(acct), fx.keys.accountKeys(acct), fx.keys.apiKey('digest-1')],
    {
      keyId: KEY,
      keyDigest: 'digest-1',
      limit: '',
      name: 'renamed',
      callerKeyId: '',
      limitReset: '',
      now: DAY,
    },
  )
  // Admit on the lagging clock counts in NEXT_DAY (lib/holds): still spent up.
  const again = (await admitFor(fx, acct, { now: DAY + 1 })) as { code: number }
  expect(again.code).toBe(-12)
})

test('a key minted from a daily key on a clock behind its period last counted carves from what that period left', async () => {
  const acct = await seedAccount(fx, 1_000_000_000)
  await fx.store.hset(fx.keys.accountKeys(acct), KEY, 'digest-1')
  // The caller's day, as a replica ahead of this Redis's clock counted it: its whole budget spent.
  const [seconds] = await fx.store.time()
  const tomorrow = periodStart('daily', Number(seconds) * 1000) + 86_400_000
  await fx.store.hset(fx.keys.account(acct), {
    [`limit:${KEY}`]: LIMIT,
    [`reset:${KEY}`]: 'daily',
    [`pstart:${KEY}`]: tomorrow,
    [`pspent:${KEY}`]: LIMIT,
  })
  const child = generateApiKey()
  const minted = await runScript(
    fx.store,
    'mintKey',
    [fx.keys.account(acct), fx.keys.accountKeys(acct), fx.keys.apiKey(child.digest)],
    {
      accountId: acct,
      keyId: child.id,
      keyDigest: child.digest,
      keyName: 'child',
      keyPrefix: child.prefix,
      maxKeys: MAX_ACTIVE_API_KEYS,
      limit: '1000',
      owner: '',
      callerKeyId: KEY,
      limitReset: 'daily',
      table: ACCOUNT_TABLE,
    },
  )
  expect(Number(minted)).toBe(AccountCode.KeyLimitBinding)
})
