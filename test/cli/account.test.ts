// `svc-gateway account ...` run as a process, against the real Redis, through the same services
// as the admin API: JSON out, the API's error shape on stderr, usage errors exit 2.
import { afterAll, describe, expect, test } from 'bun:test'
import { keyspace } from '../../src/redis/keys.ts'
import { createStore } from '../../src/redis/store.ts'
import { randomWallet } from '../helpers/accounts.ts'
import { runCli } from '../helpers/cli.ts'
import { snapshotKeys, testPrefix, testRedisUrl } from '../helpers/stack.ts'

const prefix = testPrefix()
const store = createStore(testRedisUrl(), { name: 'svc-test' })
afterAll(() => store.close())

function cli(...args: string[]) {
  return runCli(['account', ...args], {
    REDIS_URL: testRedisUrl(),
    SVC_REDIS_PREFIX: prefix,
    SVC_DEFAULT_MAX_PRICE_CENTS: '45',
  })
}

describe('svc-gateway account', () => {
  test('create, credit twice, show: the same JSON as the admin API', async () => {
    const wallet = randomWallet()
    const created = await cli('create', '--wallet', wallet.toLowerCase())
    expect(created.code).toBe(0)
    const account = JSON.parse(created.stdout) as { accountId: string; wallet: string; apiKey: string }
    expect(account.wallet).toBe(wallet)
    expect(account.apiKey).toMatch(/^svc_[A-Za-z0-9_-]{43}$/)

    const first = await cli('credit', account.accountId, '25.000000', '--note', 'demo funds')
    expect(first.code).toBe(0)
    expect(JSON.parse(first.stdout)).toMatchObject({
      accountId: account.accountId,
      creditedUsdc: '25.000000',
      balances: { confirmedUsdc: '25.000000', fundedUsdc: '25.000000', pendingUsdc: '0.000000' },
    })
    expect((await cli('credit', account.accountId, '0.000001')).code).toBe(0)

    const shown = await cli('show', account.accountId)
    expect(shown.code).toBe(0)
    expect(shown.stdout).not.toContain(account.apiKey)
    expect(JSON.parse(shown.stdout)).toMatchObject({
      accountId: account.accountId,
      wallet,
      maxPriceCents: 45,
      activeApiKeyCount: 1,
      balances: { confirmedUsdc: '25.000001', fundedUsdc: '25.000001' },
    })
    const audit = await store.xrange(keyspace(prefix).audit, '-', '+')
    expect(audit.map(([, fields]) => fields[fields.indexOf('note') + 1])).toEqual(['demo funds', ''])
    expect(audit.every(([, fields]) => fields[fields.indexOf('actor') + 1] === 'cli')).toBe(true)
  })

  test('credit with --idempotency-key: run again (its answer lost), nothing more; another amount refused', async () => {
    const account = JSON.parse((await cli('create', '--wallet', randomWallet())).stdout) as {
      accountId: string
    }
    const args = ['credit', account.accountId, '4.000000', '--idempotency-key', 'ticket-1182'] as const
    const first = await cli(...args)
    expect(first.code).toBe(0)
    const again = await cli(...args)
    expect(again.code).toBe(0)
    expect(JSON.parse(again.stdout)).toEqual(JSON.parse(first.stdout))
    expect(JSON.parse(again.stdout)).toMatchObject({ balances: { fundedUsdc: '4.000000' } })
    const before = await snapshotKeys(store, prefix)
    const other = await cli('credit', account.accountId, '5.000000', '--idempotency-key', 'ticket-1182')
    expect(other.code).toBe(1)
    expect((JSON.parse(other.stderr) as { error: { code: string } }).error.code).toBe(
      'idempotency_key_reused',
    )
    const bad = await cli('credit', account.accountId, '5.000000', '--idempotency-key', 'with space')
    expect((JSON.parse(bad.stderr) as { error: { code: string } }).error.code).toBe('invalid_idempotency_key')
    expect(await snapshotKeys(store, prefix)).toEqual(before)
  })

  test('credit without --idempotency-key makes one and prints it on stderr first: a rerun with it credits nothing more', async () => {
    const account = JSON.parse((await cli('create', '--wallet', randomWallet())).stdout) as {
      accountId: string
    }
    const first = await cli('credit', account.accountId, '3.000000')
    expect(first.code).toBe(0)
    const key = /^to retry this credit safely, run again with --idempotency-key (\S+)$/m.exec(
      first.stderr,
    )?.[1]
    expect(key).toBeDefined()
    const again = await cli('credit', account.accountId, '3.000000', '--idempotency-key', key!)
    expect(again.code).toBe(0)
    expect(again.stderr).toBe('')
    expect(JSON.parse(again.stdout)).toEqual(JSON.parse(first.stdout))
    expect(JSON.parse(again.stdout)).toMatchObject({ balances: { fundedUsdc: '3.000000' } })
    // Each run without a key is a credit of its own, with a key of its own.
    const other = await cli('credit', account.accountId, '3.000000')
    expect(other.stderr).not.toContain(key!)
    expect(JSON.parse(other.stdout)).toMatchObject({ balances: { fundedUsdc: '6.000000' } })
  })

  test('errors: the API error shape on stderr and exit 1, nothing written', async () => {
    const account = JSON.parse((await cli('create', '--wallet', randomWallet())).stdout) as {
      accountId: string
    }
    const before = await snapshotKeys(store, prefix)
    for (const [args, code] of [
      [['credit', account.accountId, '1.0000001'], 'invalid_amount'],
      [['credit', account.accountId, '0'], 'invalid_amount'],
      [['credit', 'acct_000000000000000000000000', '1'], 'account_not_found'],
      [['show', 'acct_000000000000000000000000'], 'account_not_found'],
      [['create', '--wallet', '0x1234'], 'invalid_request'],
    ] as const) {
      const result = await cli(...args)
      expect({ args, exit: result.code }).toEqual({ args, exit: 1 })
      expect(result.stdout).toBe('')
      // A credit's last line: after the Idempotency-Key it made.
      const last = result.stderr.trimEnd().split('\n').at(-1)!
      expect((JSON.parse(last) as { error: { code: string } }).error.code).toBe(code)
    }
    expect(await snapshotKeys(store, prefix)).toEqual(before)
  })

  test('usage errors exit 2', async () => {
    for (const args of [
      [],
      ['create'],
      ['credit', 'acct_x'],
      ['show'],
      ['frobnicate'],
      ['create', '--bogus'],
    ]) {
      const result = await cli(...args)
      expect({ args, exit: result.code }).toEqual({ args, exit: 2 })
      expect(result.stderr).toContain('usage:')
    }
  })
})
