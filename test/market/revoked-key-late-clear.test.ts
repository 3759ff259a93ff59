// A late clear of a request whose key was revoked, and whose revoked mark and limits a mint swept
// since (lua/mint-key.lua): the key's limit still binds what the clear may charge.
import { expect, test } from 'bun:test'
import { generateApiKey, MAX_ACTIVE_API_KEYS } from '../../src/accounts/api-keys.ts'
import { reapExpired } from '../../src/market/leases.ts'
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
// At 50 cents, a 1,000 micro-DIEM worst case holds 500 micro-USDC; cleared at 1,000 it charges 500.
const HOLD = 500

test("a reaped request's late clear after its revoked key was swept charges no more than the key's limit left", async () => {
  await postOffer(fx, 50, 1_000_000_000, { maxInFlight: 100_000 })
  const acct = await seedAccount(fx, 1_000_000_000)
  const account = fx.keys.account(acct)
  await fx.store.hset(account, `limit:${KEY}`, HOLD)
  await fx.store.hset(fx.keys.accountKeys(acct), KEY, 'digest-1')
  // Spent HOLD, at its limit; a second request admitted earlier was reaped (its hold went back).
  const a = admitted(await admitFor(fx, acct, { leaseMs: 1 }))
  await fx.store.zadd(fx.keys.leases, 1, a.attemptId)
  expect(await reapExpired(fx.store, fx.keys, 10)).toBe(1)
  const b = admitted(await admitFor(fx, acct))
  await clearFor(fx, b.attemptId, 1_000)
  expect(await fx.store.hget(account, `spent:${KEY}`)).toBe(String(HOLD))

  // The key is revoked, and a mint more than ten minutes on sweeps its mark.
  const revoked = await runScript(
    fx.store,
    'revokeKey',
    [fx.keys.accountKeys(acct), account, fx.keys.apiKey('digest-1')],
    {
      keyId: KEY,
      keyDigest: 'digest-1',
      callerKeyId: '',
    },
  )
  expect(Number(revoked)).toBe(AccountCode.Ok)
  await fx.store.hset(account, `revoked:${KEY}`, String(Date.now() - 11 * 60_000))
  const fresh = generateApiKey()
  const minted = await runScript(
    fx.store,
    'mintKey',
    [account, fx.keys.accountKeys(acct), fx.keys.apiKey(fresh.digest)],
    {
      accountId: acct,
      keyId: fresh.id,
      keyDigest: fresh.digest,
      keyName: 'k',
      keyPrefix: fresh.prefix,
      maxKeys: MAX_ACTIVE_API_KEYS,
      limit: '',
      owner: '',
      callerKeyId: '',
      limitReset: '',
      table: '',
    },
  )
  expect(Number(minted)).toBe(AccountCode.Ok)
  expect(await fx.store.hget(account, `revoked:${KEY}`)).toBeNull()

  // The reaped request's result comes now: the key's limit is used up, so nothing is charged.
  const late = await clearFor(fx, a.attemptId, 1_000)
  expect([late.charged, late.writtenOff]).toEqual([0, HOLD] as (typeof late.charged)[])
  expect(await fx.store.hget(account, `spent:${KEY}`)).toBe(String(HOLD))
})
