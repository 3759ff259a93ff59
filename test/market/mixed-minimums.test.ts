// Replicas with different SVC_MIN_ROUTABLE_MICRO_DIEM: each writes its own on the market hash at
// start, the last started setting it for all; one that finds another value there says so, and which
// wins, so a mixed setting is seen rather than learnt from routing.
import { afterAll, expect, test } from 'bun:test'
import { createLogger } from '../../src/logger.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { createStore } from '../../src/redis/store.ts'
import { logCapture } from '../helpers/accounts.ts'
import { startStack, testPrefix, testRedisUrl } from '../helpers/stack.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-minimums' })
afterAll(() => store.close())

const startWith = async (prefix: string, minimum: string) => {
  const logs = logCapture()
  const stack = await startStack({
    prefix,
    env: { SVC_MIN_ROUTABLE_MICRO_DIEM: minimum },
    logger: createLogger('warn', 'svc-test', logs.stream),
  })
  await stack.stop()
  return logs.lines.map((line) => JSON.parse(line) as Record<string, unknown>)
}
const mixed = (lines: Record<string, unknown>[]) =>
  lines.filter((line) => String(line.msg).includes('SVC_MIN_ROUTABLE_MICRO_DIEM differs'))

test('a replica that finds another minimum on the market hash warns, and its own wins', async () => {
  const prefix = testPrefix()
  const market = keyspace(prefix).market
  expect(mixed(await startWith(prefix, '20000'))).toEqual([])
  expect(await store.hget(market, 'minRoutable')).toBe('20000')
  expect(await store.hget(market, 'drySwept')).toBeNull()
  // Another replica with a lower setting: it says what it found and that its own now stands.
  const lower = mixed(await startWith(prefix, '5000'))
  expect(lower).toHaveLength(1)
  expect(lower[0]).toMatchObject({ level: 40, found: 20_000, own: 5_000 })
  expect(String(lower[0]?.msg)).toContain("this replica's setting wins")
  expect(await store.hget(market, 'minRoutable')).toBe('5000')
  // Lowered: the reaper's sweep of the dry set is due from its start.
  expect(await store.hget(market, 'drySwept')).toBe('-inf')
  // The same setting again: nothing to say.
  expect(mixed(await startWith(prefix, '5000'))).toEqual([])
})
