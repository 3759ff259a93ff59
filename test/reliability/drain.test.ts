// SIGTERM on the real `serve` process: it stops accepting, lets an open stream finish and settle
// ([DONE], charged once), then exits 0; a stream still open when the grace ends is cut and cleared
// as a client that left is (what was generated, on estimate) before Redis goes.
import { afterAll, expect, test } from 'bun:test'
import { createHash } from 'node:crypto'
import { auditAll } from '../../src/cli/audit.ts'
import { EXIT_CLEARS_LOST } from '../../src/cli/serve.ts'
import { SCRIPTS } from '../../src/redis/script-registry.ts'
import { createStore } from '../../src/redis/store.ts'
import { startSim } from '../../src/sim/server.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import { serverOf } from '../helpers/redis-cluster.ts'
import { startRedisProxy } from '../helpers/redis-proxy.ts'
import { expectChargedOnce, serving, servingStream } from '../helpers/serve-process.ts'
import { keysUnder, onTestDatabase, startStack, testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const sim = startSim({ port: 0, tokensPerSecond: 25, outputTokens: 25 })
// Slower than any grace below lets it finish: its stream is open when the grace ends.
const slowSim = startSim({ port: 0, tokensPerSecond: 5, outputTokens: 200 })
// A buffered answer that comes only long after the grace.
const lateSim = startSim({ port: 0, latencyMs: 60_000 })
const store = createStore(testRedisUrl())
afterAll(async () => {
  await sim.stop()
  await slowSim.stop()
  await lateSim.stop()
  store.close()
})

test('SIGTERM drains: the open stream completes and settles, new work is refused, exit 0', async () => {
  const { child, base, keys, accountId, reader, first } = await servingStream(sim.url, 15_000)
  let text = first
  child.kill('SIGTERM')
  // Draining: no new work is taken (the listener is closed, or /readyz says draining), once the
  // signal is handled, however long that takes on a busy machine.
  await until(async () => ((await fetch(`${base}/readyz`).catch(() => null))?.status ?? 0) !== 200)

  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    text += new TextDecoder().decode(value)
  }
  expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true)
  expect(text).toContain('"svc.cost"')
  expect(await child.exited).toBe(0)

  const acct = await store.hgetall(keys.account(accountId))
  expect(Number(acct.spent)).toBeGreaterThan(0)
  expect(acct.held).toBe('0')
  expect(await auditAll(store, keys)).toEqual([])
}, 40_000)

test('a stream still open when the grace ends is cut, then cleared before the process exits', async () => {
  const { child, keys, accountId, supportReference, reader } = await servingStream(slowSim.url, 500)
  child.kill('SIGTERM')
  // Cut at the grace's end: the client's read ends, however (an error or the body's end).
  for (;;) {
    const read = await reader.read().catch(() => null)
    if (!read || read.done) break
  }
  expect(await child.exited).toBe(0)

  // Cleared as a client that left is: what was relayed, charged once, the buyer's hold let go.
  const attempt = await attemptRecord(store, keys.attempt(`${supportReference}.1`))
  expect(attempt.state).toBe('cleared')
  expect(attempt.outcome).toBe('incomplete')
  // The supplier earned what the buyer paid, less the fee.
  await expectChargedOnce(store, keys, accountId, attempt.costUsdc!)
}, 40_000)

test('a buffered call still waiting on its supplier when the grace ends is released, nothing charged', async () => {
  const { child, keys, accountId, chat } = await serving(lateSim.url, 500)
  const answer = chat(false).catch(() => null)
  await until(async () => (await store.hget(keys.account(accountId), 'inflight')) === '1')
  child.kill('SIGTERM')
  await answer
  expect(await child.exited).toBe(0)

  const acct = await store.hgetall(keys.account(accountId))
  expect(acct.held).toBe('0')
  expect(acct.inflight).toBe('0')
  expect(acct.spent ?? '0').toBe('0')
  expect(await auditAll(store, keys)).toEqual([])
}, 40_000)

test('Redis away when the grace ends: the process still exits, and the next start reaps the hold once', async () => {
  // The child reaches Redis through a proxy (on a Cluster, in front of the master that holds its keys).
  const prefix = testPrefix()
  const target = new URL(await serverOf(testRedisUrl(), prefix))
  const proxy = startRedisProxy({ host: target.hostname, port: Number(target.port) })
  try {
    const { child, keys, accountId, supportReference } = await servingStream(slowSim.url, 500, {
      prefix,
      env: { REDIS_URL: onTestDatabase(proxy.url), SVC_STREAM_SETTLE_WAIT_MS: '500', SVC_LEASE_SECONDS: '5' },
    })
    proxy.down()
    child.kill('SIGTERM')
    // Content the buyer was sent whose clear is neither committed nor kept (no SVC_JOURNAL_DIR): said.
    expect(await child.exited).toBe(EXIT_CLEARS_LOST)
    proxy.up()
    // Nothing was cleared: the hold is the lease's, and the next replica to start reaps it.
    const attempt = keys.attempt(`${supportReference}.1`)
    expect((await attemptRecord(store, attempt)).state).toBe('admitted')
    const next = await startStack({ prefix, env: { SVC_REAP_INTERVAL_MS: '100' } })
    try {
      await until(async () => (await store.hget(keys.account(accountId), 'held')) === '0')
      const acct = await store.hgetall(keys.account(accountId))
      expect(acct.inflight).toBe('0')
      expect(acct.spent ?? '0').toBe('0')
      expect((await attemptRecord(store, attempt)).state).toBe('reaped')
      expect(await auditAll(store, keys)).toEqual([])
    } finally {
      await next.stop()
    }
  } finally {
    proxy.stop()
  }
}, 60_000)

/** The admit as it reaches Redis: its function's name (an FCALL) or its script's SHA-1 (an EVALSHA). */
const ADMIT = ['_admit\r\n', createHash('sha1').update(SCRIPTS.admit.lua).digest('hex')]

/**
 * Resolves once the child's log (JSON lines on stdout) has a line with `msg`; never if it ends first.
 * The log is read to its end either way: a pipe no longer read would fail the child's next line.
 */
function logged(stdout: ReadableStream<Uint8Array>, msg: string): Promise<void> {
  return new Promise((resolve) => {
    void (async () => {
      let text = ''
      for await (const chunk of stdout) {
        text += new TextDecoder().decode(chunk)
        if (text.split('\n').some((line) => line.includes(`"msg":"${msg}"`))) resolve()
      }
    })()
  })
}

test('an admit Redis still has when the connections are cut is waited for: the attempt is released by this process, nothing held or charged', async () => {
  const prefix = testPrefix()
  const target = new URL(await serverOf(testRedisUrl(), prefix))
  const proxy = startRedisProxy({ host: target.hostname, port: Number(target.port) })
  try {
    const { child, keys, accountId, chat } = await serving(sim.url, 500, {
      prefix,
      logs: true,
      env: { REDIS_URL: onTestDatabase(proxy.url), LOG_LEVEL: 'info', SVC_REAP_INTERVAL_MS: '60000' },
    })
    // The admit runs on Redis; its answer is held back until the stop has cut the request.
    proxy.holdReplyOf(ADMIT)
    const answer = chat(false).catch(() => null)
    await proxy.fired()
    await until(async () => (await store.hget(keys.account(accountId), 'inflight')) === '1')
    child.kill('SIGTERM')
    await answer
    // The stop settles what it has open (the admit counted), or exits without waiting for it.
    await Promise.race([
      logged(child.stdout as ReadableStream<Uint8Array>, 'stopping: settling open attempts'),
      child.exited,
    ])
    proxy.letReplies()
    expect(await child.exited).toBe(0)

    const acct = await store.hgetall(keys.account(accountId))
    expect(acct.held).toBe('0')
    expect(acct.inflight).toBe('0')
    expect(acct.spent ?? '0').toBe('0')
    const [attempt] = await keysUnder(store, `${prefix}:`, 'attempt:*')
    expect((await attemptRecord(store, attempt!)).state).toBe('released')
    expect(await auditAll(store, keys)).toEqual([])
  } finally {
    proxy.stop()
  }
}, 60_000)
