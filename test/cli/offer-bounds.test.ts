// `svc-gateway offer` takes the operator's input straight to Redis: it must refuse what
// /admin/v1/offers refuses (a capacity past a million DIEM, a supplier label past 128 characters
// or with a control or bidi character in it, an empty upstream key, a base URL that is no URL), exit 2 and change nothing. Accepted, a huge
// capacity made the public /v1/capacity a 500 (its sum is no longer an exact integer).
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { runCli } from '../helpers/cli.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let env: Record<string, string>
beforeAll(async () => {
  stack = await startStack()
  env = {
    REDIS_URL: stack.config.redisUrl,
    SVC_REDIS_PREFIX: stack.config.redisPrefix,
    SVC_MASTER_KEY: Buffer.from(stack.config.masterKey).toString('hex'),
  }
})
afterAll(() => stack.stop())

const offer = (over: Record<string, string> = {}) => {
  const flags = {
    '--base-url': stack.sim.url,
    '--key': `k-${randomBytes(4).toString('hex')}`,
    '--ask': '40',
    '--capacity': '10',
    ...over,
  }
  return ['offer', 'create', ...Object.entries(flags).flat()]
}

test('offer create refuses what the admin API refuses, and writes nothing', async () => {
  for (const over of <Record<string, string>[]>[
    { '--capacity': '1000000.000001' },
    { '--capacity': '9000000000' },
    { '--supplier': 'x'.repeat(129) },
    { '--supplier': 'two\nlines' },
    { '--supplier': 'esc\u001b[2J' },
    { '--key': '' },
    { '--base-url': 'http://[' },
  ]) {
    const before = await snapshotKeys(stack.store, stack.config.redisPrefix)
    const r = await runCli(offer(over), env)
    expect({ over, code: r.code }).toEqual({ over, code: 2 })
    expect(await snapshotKeys(stack.store, stack.config.redisPrefix)).toEqual(before)
  }
  // The cap itself is accepted.
  expect((await runCli(offer({ '--capacity': '1000000' }), env)).code).toBe(0)
})

test('offer update refuses an empty key or an uncapped capacity, and changes nothing', async () => {
  const created = await runCli(offer(), env)
  const { id } = JSON.parse(created.stdout) as { id: string }
  for (const args of [
    ['--key', ''],
    ['--capacity', '2000000'],
    ['--supplier', 'x'.repeat(129)],
    ['--supplier', 'gpj\u202eexe'],
  ]) {
    const before = await snapshotKeys(stack.store, stack.config.redisPrefix)
    const r = await runCli(['offer', 'update', id, ...args], env)
    expect({ args, code: r.code }).toEqual({ args, code: 2 })
    expect(await snapshotKeys(stack.store, stack.config.redisPrefix)).toEqual(before)
  }
})

test('the public capacity snapshot stays a 200 whatever the operator typed', async () => {
  await runCli(offer({ '--capacity': '9000000000' }), env)
  await runCli(offer({ '--capacity': '9000000000' }), env)
  const response = await fetch(`${stack.url}/v1/capacity`)
  expect(response.status).toBe(200)
})
