// A supplier call's deadline lives as long as the call needs it and no longer: a buffered answer's
// until all of it is in, a stream's until the first bytes of a 2xx body, a failure's until it is
// classified. A timer left for SVC_UPSTREAM_TIMEOUT_MS (300 s by default) would hold its closure
// and signals that long after every request. Timers are watched by wrapping setTimeout and clearTimeout.
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { callSupplier } from '../../src/inference/supplier.ts'
import { type SimServer, startSim } from '../../src/sim/server.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

// A deadline no other timer in the process uses, so the wrapper can tell it apart.
const DEADLINE_MS = 123_457

const realSet = globalThis.setTimeout
const realClear = globalThis.clearTimeout
let started: unknown[] = []
let cleared = new Set<unknown>()

function watchDeadlines() {
  started = []
  cleared = new Set()
  globalThis.setTimeout = ((handler: (...args: unknown[]) => void, ms?: number, ...rest: unknown[]) => {
    const timer = realSet(handler, ms, ...rest)
    if (ms === DEADLINE_MS) started.push(timer)
    return timer
  }) as typeof setTimeout
  globalThis.clearTimeout = ((timer?: Timer) => {
    cleared.add(timer)
    realClear(timer)
  }) as typeof clearTimeout
}
afterEach(() => {
  globalThis.setTimeout = realSet
  globalThis.clearTimeout = realClear
})

const pending = () => started.filter((t) => !cleared.has(t)).length

let sim: SimServer
beforeAll(() => {
  sim = startSim({ port: 0, outputTokens: 5 })
})
afterAll(() => sim.stop())

const call = (stream: boolean, apiKey = `key-${Math.random()}`, baseUrl = sim.url) =>
  callSupplier({
    baseUrl,
    apiKey,
    path: '/chat/completions',
    body: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }], stream },
    stream,
    signal: new AbortController().signal,
    timeoutMs: DEADLINE_MS,
    maxBodyBytes: 1024 * 1024,
  })

describe('callSupplier', () => {
  // That it runs while the body is still arriving is test/upstream/client.test.ts's ('deadline').
  test("a buffered answer's deadline ends once the whole answer is in", async () => {
    watchDeadlines()
    const outcome = await call(false)
    if (!outcome.ok) throw new Error(outcome.code)
    await outcome.response.json()
    expect(started).toHaveLength(1)
    expect(pending()).toBe(0)
  })

  test('a failure ends its deadline once classified: an error status, an unreachable supplier', async () => {
    watchDeadlines()
    const key = `key-${Math.random()}`
    sim.keys.get(key).fault = 'error_5xx'
    const failed = await call(false, key)
    expect(failed).toMatchObject({ ok: false, code: 'upstream_503' })
    const unreachable = await call(false, key, 'http://127.0.0.1:1')
    expect(unreachable).toMatchObject({ ok: false, code: 'upstream_unreachable' })
    expect(started).toHaveLength(2)
    expect(pending()).toBe(0)
  })

  test("a stream refused with an error status keeps its deadline until the error's body is read", async () => {
    watchDeadlines()
    const key = `key-${Math.random()}`
    sim.keys.get(key).fault = 'error_5xx'
    const failed = await call(true, key)
    expect(failed).toMatchObject({ ok: false, code: 'upstream_503' })
    expect(started).toHaveLength(1)
    expect(pending()).toBe(0)
  })

  test("a stream's deadline ends with the first bytes of its body", async () => {
    watchDeadlines()
    const outcome = await call(true)
    if (!outcome.ok) throw new Error(outcome.code)
    expect(started).toHaveLength(1)
    expect(await outcome.response.read()).not.toBeNull()
    expect(pending()).toBe(0)
    outcome.response.cancel()
  })
})

describe('through the gateway', () => {
  let stack: TestStack
  beforeAll(async () => {
    stack = await startStack({
      sim: { outputTokens: 3 },
      env: { SVC_UPSTREAM_TIMEOUT_MS: String(DEADLINE_MS) },
    })
    await simOffer(stack, 40)
  })
  afterAll(() => stack.stop())

  test('no buffered request leaves its deadline running after its answer', async () => {
    const buyer = await fundedBuyer(stack)
    watchDeadlines()
    for (let i = 0; i < 5; i++) {
      const response = await fetch(`${stack.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${buyer.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }] }),
      })
      expect(response.status).toBe(200)
      await response.text()
    }
    expect(started).toHaveLength(5)
    expect(pending()).toBe(0)
  })
})
