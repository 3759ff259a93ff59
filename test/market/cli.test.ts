// The operator's CLI, run in-process (test/helpers/cli.ts) against the test Redis: offer commands and
// the audit.
import { afterAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { keyspace } from '../../src/redis/keys.ts'
import { createStore } from '../../src/redis/store.ts'
import { runCli } from '../helpers/cli.ts'
import { keysUnder, testPrefix, testRedisUrl } from '../helpers/stack.ts'

const prefix = testPrefix()
const keys = keyspace(prefix)
const store = createStore(testRedisUrl())
afterAll(() => store.close())
const env = {
  REDIS_URL: testRedisUrl(),
  SVC_REDIS_PREFIX: prefix,
  SVC_MASTER_KEY: randomBytes(32).toString('hex'),
}

const cli = (...args: string[]) => runCli(args, env)

describe('svc-gateway offer and audit', () => {
  test('create, pause, list and delete an offer; the key never printed', async () => {
    const created = await cli(
      'offer',
      'create',
      '--base-url',
      'http://127.0.0.1:9',
      '--key',
      'sk-cli-secret-1',
      '--ask',
      '44',
      '--capacity',
      '7.25',
    )
    expect(created.code).toBe(0)
    expect(created.stdout).not.toContain('sk-cli-secret-1')
    const offer = JSON.parse(created.stdout) as { id: string; askCents: number; capacityDiem: string }
    expect(offer).toMatchObject({ askCents: 44, capacityDiem: '7.250000' })
    expect(await store.zscore(keys.ladder, offer.id)).not.toBeNull()

    expect((await cli('offer', 'pause', offer.id)).code).toBe(0)
    expect(await store.zscore(keys.ladder, offer.id)).toBeNull()
    const list = JSON.parse((await cli('offer', 'list')).stdout) as { data: { id: string; status: string }[] }
    expect(list.data).toEqual([expect.objectContaining({ id: offer.id, status: 'paused' })])
    expect((await cli('offer', 'delete', offer.id)).code).toBe(0)
    expect(JSON.parse((await cli('offer', 'list')).stdout).data).toEqual([])
  })

  test('bad arguments: exit 2 with the usage, nothing written', async () => {
    const before = await keysUnder(store, keys.base)
    for (const args of [
      ['offer', 'create', '--ask', '44'],
      ['offer', 'create', '--base-url', 'http://x', '--key', 'k', '--ask', '90', '--capacity', '1'],
      ['offer', 'frobnicate'],
      ['offer', 'pause'],
    ]) {
      const result = await cli(...args)
      expect(result.code).toBe(2)
      expect(result.stderr).toContain('usage:')
    }
    expect(await keysUnder(store, keys.base)).toEqual(before)
    const missing = await cli('offer', 'pause', 'no-such-offer')
    expect(missing.code).toBe(1)
    expect(JSON.parse(missing.stderr).error.code).toBe('offer_not_found')
  })

  test('offer create with --idempotency-key: run again (its answer lost), the same offer and no other', async () => {
    const args = ['offer', 'create', '--base-url', 'http://127.0.0.1:9/cli-idem', '--key', 'sk-cli-idem']
    const create = (ask: string) =>
      cli(...args, '--ask', ask, '--capacity', '3', '--idempotency-key', 'cli-77')
    const first = await create('44')
    expect(first.code).toBe(0)
    const again = await create('44')
    expect(again.code).toBe(0)
    const id = (JSON.parse(first.stdout) as { id: string }).id
    expect((JSON.parse(again.stdout) as { id: string }).id).toBe(id)
    const list = JSON.parse((await cli('offer', 'list')).stdout) as { data: { id: string }[] }
    expect(list.data.map((o) => o.id)).toEqual([id])
    const other = await create('45')
    expect(other.code).toBe(1)
    expect(JSON.parse(other.stderr).error.code).toBe('idempotency_key_reused')
    const update = await cli('offer', 'update', id, '--ask', '45', '--idempotency-key', 'cli-78')
    expect(update.code).toBe(2)
    expect((await cli('offer', 'delete', id)).code).toBe(0)
  })

  test('audit exits 0 on a sound keyspace and 1 naming what is off', async () => {
    const clean = await cli('audit')
    expect(clean.code).toBe(0)
    expect(clean.stdout).toContain('every invariant holds')
    await store.hset(keys.account('acct_broken'), {
      id: 'acct_broken',
      confirmed: 5,
      pending: 0,
      held: 0,
      spent: 0,
      funded: 4,
      writtenOff: 0,
    })
    await store.sadd(keys.accounts, 'acct_broken')
    const broken = await cli('audit')
    expect(broken.code).toBe(1)
    expect(broken.stdout).toContain('account acct_broken: funded 4 != confirmed + pending + held + spent 5')
  })
})
