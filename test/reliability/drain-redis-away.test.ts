// SIGTERM while Redis is unreachable, requests in flight: the stop is bounded (grace, then the
// clear's wait), a stream the buyer was sent is kept in the journal's directory and charged once
// when a gateway starts on it with Redis back, and a buffered answer the buyer never got (its clear
// found no store: a 503) is charged nothing.
import { afterAll, expect, test } from 'bun:test'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { auditAll } from '../../src/cli/audit.ts'
import { EXIT_CLEARS_LOST } from '../../src/cli/serve.ts'
import { createStore } from '../../src/redis/store.ts'
import { startSim } from '../../src/sim/server.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import { serverOf } from '../helpers/redis-cluster.ts'
import { startRedisProxy } from '../helpers/redis-proxy.ts'
import { expectChargedOnce, serving, servingStream } from '../helpers/serve-process.ts'
import { keysUnder, onTestDatabase, testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

// Ends about a second after it opens: within any grace below.
const sim = startSim({ port: 0, tokensPerSecond: 25, outputTokens: 25 })
// A buffered answer that comes a second after the call.
const slowSim = startSim({ port: 0, latencyMs: 1_000 })
const store = createStore(testRedisUrl())
afterAll(async () => {
  await sim.stop()
  await slowSim.stop()
  store.close()
})

const GRACE_MS = 15_000
const SETTLE_WAIT_MS = 500

/** A proxy in front of the server that holds `prefix`'s keys (on a Cluster, its master). */
async function proxyFor(prefix: string) {
  const target = new URL(await serverOf(testRedisUrl(), prefix))
  return startRedisProxy({ host: target.hostname, port: Number(target.port) })
}

/** Everything the child wrote on stdout (its JSON log lines), once it has exited. */
async function logOf(child: { stdout: unknown }): Promise<string> {
  return await new Response(child.stdout as ReadableStream<Uint8Array>).text()
}

/** Drains a stream's body to its end, whatever ends it. */
async function readAll(
  reader: { read(): Promise<{ done: boolean; value?: Uint8Array }> },
  first: string,
): Promise<string> {
  let text = first
  for (;;) {
    const read = await reader.read().catch(() => null)
    if (!read || read.done) return text
    text += new TextDecoder().decode(read.value)
  }
}

test('a stream the buyer was sent while Redis is away at SIGTERM is kept, and charged once when a gateway starts on it', async () => {
  const prefix = testPrefix()
  const dir = mkdtempSync(join(tmpdir(), 'svc-journal-'))
  const proxy = await proxyFor(prefix)
  try {
    const env = {
      REDIS_URL: onTestDatabase(proxy.url),
      SVC_STREAM_SETTLE_WAIT_MS: String(SETTLE_WAIT_MS),
      SVC_LEASE_SECONDS: '5',
      SVC_JOURNAL_DIR: dir,
      LOG_LEVEL: 'info',
    }
    const { child, keys, accountId, supportReference, reader, first } = await servingStream(
      sim.url,
      GRACE_MS,
      { prefix, env, logs: true },
    )
    proxy.down()
    const signalled = Date.now()
    child.kill('SIGTERM')
    // The buyer was sent the whole answer; its cost is not known (Redis is away).
    const text = await readAll(reader, first)
    expect(text).toContain('"content"')
    expect(text).toContain('store_unavailable')
    const [code, log] = await Promise.all([child.exited, logOf(child)])
    // Bounded: the stream ended well within the grace, its clear waited SETTLE_WAIT_MS, then the stop.
    expect(Date.now() - signalled).toBeLessThan(GRACE_MS)
    expect(code).toBe(0)
    // The log says what was left, and where.
    expect(log).toContain('"kept":1')
    expect(readdirSync(dir).length).toBe(1)

    proxy.up()
    const attempt = keys.attempt(`${supportReference}.1`)
    expect((await attemptRecord(store, attempt)).state).toBe('admitted')
    // A gateway starts on the same directory with Redis back: the kept clear lands.
    const next = await serving(sim.url, GRACE_MS, { prefix, env: { SVC_JOURNAL_DIR: dir } })
    try {
      await until(async () => (await attemptRecord(store, attempt)).state === 'cleared')
      await until(async () => readdirSync(dir).length === 0)
    } finally {
      next.child.kill('SIGTERM')
      expect(await next.child.exited).toBe(0)
    }
    // A third start on the directory finds nothing to send again: charged once.
    const again = await serving(sim.url, GRACE_MS, { prefix, env: { SVC_JOURNAL_DIR: dir } })
    again.child.kill('SIGTERM')
    expect(await again.child.exited).toBe(0)

    const record = await attemptRecord(store, attempt)
    expect(record.outcome).toBe('completed')
    await expectChargedOnce(store, keys, accountId, record.costUsdc!)
  } finally {
    proxy.stop()
  }
}, 90_000)

test('a buffered answer whose clear finds no store at SIGTERM is a 503, and is charged nothing after', async () => {
  const prefix = testPrefix()
  const dir = mkdtempSync(join(tmpdir(), 'svc-journal-'))
  const proxy = await proxyFor(prefix)
  try {
    const env = {
      REDIS_URL: onTestDatabase(proxy.url),
      SVC_LEASE_SECONDS: '5',
      SVC_JOURNAL_DIR: dir,
    }
    const { child, keys, accountId, chat } = await serving(slowSim.url, GRACE_MS, { prefix, env })
    const answer = chat(false)
    await until(async () => (await store.hget(keys.account(accountId), 'inflight')) === '1')
    proxy.down()
    const signalled = Date.now()
    child.kill('SIGTERM')
    const response = await answer
    expect(response.status).toBe(503)
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('store_unavailable')
    expect(await child.exited).toBe(0)
    expect(Date.now() - signalled).toBeLessThan(GRACE_MS)
    // Not served: nothing kept to be charged.
    expect(readdirSync(dir)).toEqual([])

    proxy.up()
    const next = await serving(sim.url, GRACE_MS, {
      prefix,
      env: { SVC_JOURNAL_DIR: dir, SVC_REAP_INTERVAL_MS: '100' },
    })
    try {
      const [attempt] = await keysUnder(store, `${prefix}:`, 'attempt:*')
      await until(async () => (await attemptRecord(store, attempt!)).state === 'reaped')
    } finally {
      next.child.kill('SIGTERM')
      expect(await next.child.exited).toBe(0)
    }
    const acct = await store.hgetall(keys.account(accountId))
    expect(acct.held).toBe('0')
    expect(acct.inflight).toBe('0')
    expect(acct.spent ?? '0').toBe('0')
    expect(await auditAll(store, keys)).toEqual([])
  } finally {
    proxy.stop()
  }
}, 90_000)

test('Redis that takes commands and never answers (paused) at SIGTERM: the stop ends, bounded, and the stream is charged once later', async () => {
  const prefix = testPrefix()
  const dir = mkdtempSync(join(tmpdir(), 'svc-journal-'))
  const proxy = await proxyFor(prefix)
  const graceMs = 1_000
  // Its tries outlast the stop's wait after it closes the store: the clear fails at the close.
  const settleWaitMs = 3_000
  try {
    const env = {
      REDIS_URL: onTestDatabase(proxy.url),
      SVC_STREAM_SETTLE_WAIT_MS: String(settleWaitMs),
      SVC_JOURNAL_DIR: dir,
      LOG_LEVEL: 'info',
    }
    const { child, keys, accountId, supportReference, reader, first } = await servingStream(
      sim.url,
      graceMs,
      { prefix, env, logs: true },
    )
    proxy.hold()
    const signalled = Date.now()
    child.kill('SIGTERM')
    expect(await readAll(reader, first)).toContain('"content"')
    const exited = await Promise.race([child.exited, Bun.sleep(30_000).then(() => 'hung' as const)])
    if (exited === 'hung') child.kill('SIGKILL')
    expect(exited).toBe(0)
    // The grace, the clear's wait, and a bounded stop after.
    expect(Date.now() - signalled).toBeLessThan(graceMs + settleWaitMs + 10_000)
    const log = await logOf(child)
    expect(log).toContain('stopping with attempts unsettled')
    expect(log).toContain('"kept":1')

    // Redis answers again (what it was sent never ran); a gateway starts on the directory.
    proxy.down()
    proxy.up()
    const attempt = keys.attempt(`${supportReference}.1`)
    const next = await serving(sim.url, GRACE_MS, { prefix, env: { SVC_JOURNAL_DIR: dir } })
    try {
      await until(async () => (await attemptRecord(store, attempt)).state === 'cleared')
      await until(async () => readdirSync(dir).length === 0)
    } finally {
      next.child.kill('SIGTERM')
      expect(await next.child.exited).toBe(0)
    }
    const acct = await store.hgetall(keys.account(accountId))
    expect(acct.held).toBe('0')
    expect(acct.inflight).toBe('0')
    expect(Number(acct.spent)).toBeGreaterThan(0)
    expect(acct.spent).toBe((await attemptRecord(store, attempt)).costUsdc!)
    expect(await auditAll(store, keys)).toEqual([])
  } finally {
    proxy.stop()
  }
}, 90_000)

/** A stream sent whole with Redis refusing connections at SIGTERM: the process's exit code and log. */
async function stopWithStreamUnsent(env: Record<string, string>, beforeStop: () => void = () => {}) {
  const prefix = testPrefix()
  const proxy = await proxyFor(prefix)
  try {
    const { child, reader, first } = await servingStream(sim.url, GRACE_MS, {
      prefix,
      env: {
        REDIS_URL: onTestDatabase(proxy.url),
        SVC_STREAM_SETTLE_WAIT_MS: String(SETTLE_WAIT_MS),
        LOG_LEVEL: 'info',
        ...env,
      },
      logs: true,
    })
    beforeStop()
    proxy.down()
    child.kill('SIGTERM')
    expect(await readAll(reader, first)).toContain('store_unavailable')
    const [code, log] = await Promise.all([child.exited, logOf(child)])
    return { code, log }
  } finally {
    proxy.stop()
  }
}

test('a stream the buyer was sent while Redis is away at SIGTERM, with no SVC_JOURNAL_DIR: exit 3, the clear named lost', async () => {
  const { code, log } = await stopWithStreamUnsent({})
  expect(code).toBe(EXIT_CLEARS_LOST)
  expect(log).toContain('"lostClears":1')
}, 90_000)

test('a stream the buyer was sent while Redis is away at SIGTERM, with an SVC_JOURNAL_DIR it cannot write: exit 3', async () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'svc-journal-')), 'journal')
  const { code, log } = await stopWithStreamUnsent({ SVC_JOURNAL_DIR: dir }, () => {
    // The directory the gateway started on is gone, a file in its place: nothing can be written there.
    rmSync(dir, { recursive: true })
    writeFileSync(dir, '')
  })
  expect(code).toBe(EXIT_CLEARS_LOST)
  expect(log).toContain('"lostClears":1')
  expect(readFileSync(dir, 'utf8')).toBe('')
}, 90_000)

test('Redis that takes commands and never answers at SIGTERM, nothing in flight: the stop ends, bounded, exit 0', async () => {
  const prefix = testPrefix()
  const proxy = await proxyFor(prefix)
  const settleWaitMs = 1_000
  const webhookTimeoutMs = 1_000
  try {
    const { child } = await serving(sim.url, 1_000, {
      prefix,
      env: {
        REDIS_URL: onTestDatabase(proxy.url),
        SVC_STREAM_SETTLE_WAIT_MS: String(settleWaitMs),
        SVC_WEBHOOK_TIMEOUT_MS: String(webhookTimeoutMs),
        // A reaper pass is in flight when Redis stops answering: the stop waits on it.
        SVC_REAP_INTERVAL_MS: '100',
      },
    })
    proxy.hold()
    await proxy.held()
    const signalled = Date.now()
    child.kill('SIGTERM')
    const exited = await Promise.race([child.exited, Bun.sleep(30_000).then(() => 'hung' as const)])
    if (exited === 'hung') child.kill('SIGKILL')
    expect(exited).toBe(0)
    expect(Date.now() - signalled).toBeLessThan(settleWaitMs + 10_000)
  } finally {
    proxy.stop()
  }
}, 90_000)
