// A command's store (an operator command's) on a Cluster none of whose nodes answers: ioredis
// queues a Cluster's command for as long as it reconnects, so without a bound the command, and
// the operator's `svc-gateway account show`, waited forever where a single server fails at once.
// Bounded, what it queued fails as Redis being away, and the command exits 1.
import { expect, test } from 'bun:test'
import { isRedisUnavailable } from '../../src/redis/connection.ts'
import { createStore } from '../../src/redis/store.ts'
import { runCli } from '../helpers/cli.ts'

/** A local port nothing listens on: one the system gave a listener, closed again. */
function deadPort(): number {
  const listener = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
  const { port } = listener
  listener.stop(true)
  return port
}

/** A command's store gives up within its reconnects (about 5 s); a busy machine is allowed this. */
const GIVES_UP_MS = 20_000

test("a command's store on a Cluster that never answers: a command fails as Redis being away", async () => {
  const store = createStore(`redis+cluster://127.0.0.1:${deadPort()}`, { name: 'svc-test-unreachable' })
  try {
    const startedAt = Date.now()
    const error = await store.get('svc:{unreachable}:k').then(
      () => null,
      (failure: unknown) => failure,
    )
    expect(Date.now() - startedAt).toBeLessThan(GIVES_UP_MS)
    expect(error).not.toBeNull()
    expect(isRedisUnavailable(error)).toBe(true)
  } finally {
    store.close()
  }
}, 60_000)

test('an operator command against a Cluster that never answers exits 1, not waits forever', async () => {
  const startedAt = Date.now()
  const result = await runCli(['account', 'show', 'acct_unreachable'], {
    REDIS_URL: `redis+cluster://127.0.0.1:${deadPort()}`,
  })
  expect(Date.now() - startedAt).toBeLessThan(GIVES_UP_MS)
  expect(result.code).toBe(1)
  expect(result.stderr).toContain('None of startup nodes is available')
}, 60_000)
