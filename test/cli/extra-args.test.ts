// Operator commands given more arguments than they take: a usage error (exit 2) and nothing
// changed, never a silent success that acted on the first argument only.
import { afterAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { createStore } from '../../src/redis/store.ts'
import { runCli } from '../helpers/cli.ts'
import { snapshotKeys, testPrefix, testRedisUrl } from '../helpers/stack.ts'

const prefix = testPrefix()
const store = createStore(testRedisUrl(), { name: 'svc-test' })
afterAll(() => store.close())
const env = {
  REDIS_URL: testRedisUrl(),
  SVC_REDIS_PREFIX: prefix,
  SVC_MASTER_KEY: randomBytes(32).toString('hex'),
}

async function createOffer() {
  const r = await runCli(
    [
      'offer',
      'create',
      '--base-url',
      'http://127.0.0.1:9',
      '--key',
      `k-${randomBytes(4).toString('hex')}`,
      '--ask',
      '40',
      '--capacity',
      '10',
    ],
    env,
  )
  expect(r.code).toBe(0)
  return (JSON.parse(r.stdout) as { id: string }).id
}

test('offer delete with two ids is a usage error, and deletes neither', async () => {
  const a = await createOffer()
  const b = await createOffer()
  const before = await snapshotKeys(store, prefix)
  const r = await runCli(['offer', 'delete', a, b], env)
  expect(r.code).toBe(2)
  expect(await snapshotKeys(store, prefix)).toEqual(before)
})

test('offer pause with an option it does not take is a usage error', async () => {
  const a = await createOffer()
  const r = await runCli(['offer', 'pause', a, '--ask', '30'], env)
  expect(r.code).toBe(2)
})

test('offer list and supplier list with an extra argument are usage errors', async () => {
  expect((await runCli(['offer', 'list', 'extra'], env)).code).toBe(2)
  expect((await runCli(['supplier', 'list', 'extra'], env)).code).toBe(2)
  expect((await runCli(['supplier', 'suspend', 'sup_a', 'sup_b'], env)).code).toBe(2)
})

test('account commands with an option they do not take are usage errors, and change nothing', async () => {
  const before = await snapshotKeys(store, prefix)
  const wallet = `0x${randomBytes(20).toString('hex')}`
  for (const args of [
    ['account', 'create', '--wallet', wallet, '--note', 'x'],
    ['account', 'show', 'acct_x', '--note', 'x'],
    ['account', 'credit', 'acct_x', '1', '--wallet', wallet],
  ]) {
    const r = await runCli(args, env)
    expect([args.join(' '), r.code]).toEqual([args.join(' '), 2])
  }
  expect(await snapshotKeys(store, prefix)).toEqual(before)
})
