// A stream's end (chat, Responses, Messages) tells the real outcome of its clear when the store
// goes away around it. Redis runs the clear and its reply is lost (a proxy of the test's own drops
// it and keeps the store away for a while): the stream stays open with keep-alives and retries the
// idempotent clear, so the client is told the cost Redis holds; if the store stays away past
// SVC_STREAM_SETTLE_WAIT_MS the stream ends with store_unavailable naming the request's record,
// never "nothing was charged". A clear refused by its script still ends with settle_failed and
// charges nothing.
import { afterAll, describe, expect, test } from 'bun:test'
import { createHash } from 'node:crypto'
import { SCRIPTS } from '../src/redis/script-registry.ts'
import { keyFetch, type TestAccount } from '../test/helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../test/helpers/buyers.ts'
import { serverOf } from '../test/helpers/redis-cluster.ts'
import { type RedisProxy, startRedisProxy } from '../test/helpers/redis-proxy.ts'
import { startStack, type TestStack, testPrefix, testRedisUrl } from '../test/helpers/stack.ts'

/**
 * The clear on the wire, whichever way it travels: an FCALL on the native connection (the
 * function's name ends in `_clear`), or, while that connection reconnects, ioredis's EVALSHA of the
 * script (either form) or its EVAL with the whole text, on a connection that has not sent it yet
 * (found by a line of the clear's own header, shorter than the proxy's split-read window).
 */
const CLEAR = [
  '_clear\r\n',
  ...[SCRIPTS.clear.lua, SCRIPTS.clear.guarded].map((lua) => createHash('sha1').update(lua).digest('hex')),
  'clear: end one admitted attempt that was served',
]

interface Setup {
  stack: TestStack
  proxy: RedisProxy
  buyer: TestAccount
}

const setups: Setup[] = []

async function setup(settleWaitMs: number): Promise<Setup> {
  // On a Cluster, the proxy stands in front of the master that holds the stack's keys.
  const prefix = testPrefix()
  const target = new URL(await serverOf(testRedisUrl(), prefix))
  const proxy = startRedisProxy({ host: target.hostname, port: Number(target.port) })
  const stack = await startStack({
    prefix,
    env: {
      REDIS_URL: proxy.url,
      SVC_STREAM_SETTLE_WAIT_MS: String(settleWaitMs),
      SVC_KEEPALIVE_MS: '100',
      // The proxy answers a cued command's whole chunk: no reaper call may share the clear's write.
      SVC_REAP_INTERVAL_MS: '60000',
    },
  })
  await simOffer(stack, 40)
  const s = { stack, proxy, buyer: await fundedBuyer(stack) }
  setups.push(s)
  return s
}

afterAll(async () => {
  for (const { stack, proxy } of setups) {
    proxy.up()
    await stack.stop()
    proxy.stop()
  }
})

const retrying = await setup(20_000)
const givingUp = await setup(300)

type Kind = 'chat' | 'responses' | 'messages'

const STREAMS: { [kind in Kind]: [path: string, body: { [field: string]: unknown }] } = {
  chat: [
    '/v1/chat/completions',
    { model: 'llama-3.3-70b', stream: true, messages: [{ role: 'user', content: 'hi' }] },
  ],
  responses: ['/v1/responses', { model: 'llama-3.3-70b', stream: true, input: 'hi' }],
  messages: [
    '/v1/messages',
    { model: 'llama-3.3-70b', stream: true, max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] },
  ],
}

function stream(s: Setup, kind: Kind) {
  const [path, json] = STREAMS[kind]
  return keyFetch(s.stack, s.buyer.apiKey, path, {
    method: 'POST',
    json,
    signal: AbortSignal.timeout(20_000),
  })
}

/** Every SSE frame's data, parsed ([DONE] as the string). */
function frames(text: string): unknown[] {
  return text
    .split('\n\n')
    .map((f) => f.split('\n').find((line) => line.startsWith('data: ')))
    .filter((line): line is string => line !== undefined)
    .map((line) => (line === 'data: [DONE]' ? '[DONE]' : JSON.parse(line.slice(6))))
}

type Record = { status: string; costUsdc: string }

async function record(s: Setup, reference: string): Promise<Record> {
  const response = await keyFetch(s.stack, s.buyer.apiKey, `/v1/agent/requests/${reference}`)
  expect(response.status).toBe(200)
  return (await response.json()) as Record
}

/** Starts a stream whose clear's reply is lost, keeps the store away for `awayMs`, reads it all. */
async function lostClearReply(s: Setup, kind: Kind, awayMs: number) {
  s.proxy.loseReplyOf(CLEAR)
  const response = await stream(s, kind)
  expect(response.status).toBe(200)
  const reference = response.headers.get('x-svc-support-reference')!
  const body = response.text()
  // A stream that ended before its clear met the cue says so, rather than waiting out the test.
  let fired = false
  await Promise.race([
    s.proxy.fired().then(() => {
      fired = true
    }),
    body.then((text) => {
      if (!fired)
        throw new Error(`the stream ended before its clear met the proxy's cue: ${text.slice(-300)}`)
    }),
  ])
  await Bun.sleep(awayMs)
  s.proxy.up()
  const text = await body
  await storeBack(s)
  return { reference, text }
}

/**
 * Until the gateway has its store again (it reconnects by itself) and its clear journal has sent
 * again what it kept: a clear it replays later would meet the next test's cue.
 */
async function storeBack(s: Setup) {
  for (let i = 0; i < 200; i++) {
    if ((await fetch(`${s.stack.url}/readyz`)).status === 200) {
      await s.stack.gateway.replaysSettled()
      return
    }
    await Bun.sleep(50)
  }
  throw new Error('the gateway did not reconnect')
}

describe('a stream whose clear ran and whose reply was lost', () => {
  test('chat: kept open with keep-alives, retried, and told the cost its record holds', async () => {
    const { reference, text } = await lostClearReply(retrying, 'chat', 1_500)
    const data = frames(text)
    const cost = data.find((f) => (f as { object?: string }).object === 'svc.cost') as { costUsdc: string }
    expect(data.filter((f) => (f as { error?: unknown }).error)).toEqual([])
    expect(cost).toBeDefined()
    expect(data.at(-1)).toBe('[DONE]')
    expect(text).toContain(': keep-alive')
    const charged = await record(retrying, reference)
    expect(charged.status).toBe('completed')
    expect(charged.costUsdc).toBe(cost.costUsdc)
    expect(Number(cost.costUsdc)).toBeGreaterThan(0)
  })

  test('Responses: retried, and response.completed carries the cost its record holds', async () => {
    const { reference, text } = await lostClearReply(retrying, 'responses', 1_500)
    const data = frames(text) as { type: string; costUsdc?: string }[]
    const completed = data.find((f) => f.type === 'response.completed')
    expect(data.map((f) => f.type)).not.toContain('response.failed')
    expect(completed?.costUsdc).toBeDefined()
    expect((await record(retrying, reference)).costUsdc).toBe(completed!.costUsdc!)
  })

  test('Messages: retried, pings while it waits, then message_delta with the cost its record holds and message_stop', async () => {
    const { reference, text } = await lostClearReply(retrying, 'messages', 1_500)
    const data = frames(text) as { type: string; costUsdc?: string }[]
    const types = data.map((f) => f.type)
    expect(types).not.toContain('error')
    expect(types.slice(-2)).toEqual(['message_delta', 'message_stop'])
    // message_start's ping, and more while the clear was retried.
    expect(types.filter((t) => t === 'ping').length).toBeGreaterThan(1)
    const delta = data.at(-2)!
    expect(Number(delta.costUsdc)).toBeGreaterThan(0)
    expect((await record(retrying, reference)).costUsdc).toBe(delta.costUsdc!)
  })

  test('chat: past SVC_STREAM_SETTLE_WAIT_MS it ends with store_unavailable naming the record, not "nothing charged"', async () => {
    const { reference, text } = await lostClearReply(givingUp, 'chat', 1_500)
    const data = frames(text) as {
      object?: string
      error?: { code: string; message: string; supportReference: string }
    }[]
    const error = data.at(-1)!.error!
    expect(error.code).toBe('store_unavailable')
    expect(error.supportReference).toBe(reference)
    expect(error.message).toContain(`/v1/agent/requests/${reference}`)
    expect(error.message).not.toContain('nothing was charged')
    expect(data.some((f) => f.object === 'svc.cost')).toBe(false)
    // The clear did commit: the record, once the store is back, says so.
    const charged = await record(givingUp, reference)
    expect(charged.status).toBe('completed')
    expect(Number(charged.costUsdc)).toBeGreaterThan(0)
  })

  test('Responses: past the wait it ends with an error event store_unavailable, not response.failed', async () => {
    const { reference, text } = await lostClearReply(givingUp, 'responses', 1_500)
    const data = frames(text) as {
      type: string
      code?: string
      message?: string
      supportReference?: string
    }[]
    const last = data.at(-1)!
    expect(last.type).toBe('error')
    expect(last.code).toBe('store_unavailable')
    expect(last.supportReference).toBe(reference)
    expect(last.message).toContain(`/v1/agent/requests/${reference}`)
    expect(data.map((f) => f.type)).not.toContain('response.failed')
    expect(Number((await record(givingUp, reference)).costUsdc)).toBeGreaterThan(0)
  })
  test("Messages: past the wait it ends with Anthropic's error event store_unavailable, no message_delta", async () => {
    const { reference, text } = await lostClearReply(givingUp, 'messages', 1_500)
    const data = frames(text) as { type: string; error?: { type: string; code: string; message: string } }[]
    const types = data.map((f) => f.type)
    expect(types).not.toContain('message_delta')
    expect(types).not.toContain('message_stop')
    const last = data.at(-1)!
    expect(last.type).toBe('error')
    expect(last.error).toMatchObject({ type: 'api_error', code: 'store_unavailable' })
    expect(last.error!.message).toContain(`/v1/agent/requests/${reference}`)
    expect(Number((await record(givingUp, reference)).costUsdc)).toBeGreaterThan(0)
  })
})

test('a clear its script refuses still ends with settle_failed, and nothing is charged', async () => {
  const { stack, proxy } = givingUp
  const buyer = await fundedBuyer(stack)
  // The store is back from the tests before: a stream settles whole again before the cue is set.
  for (let i = 0; i < 50; i++) {
    const warm = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', stream: true, messages: [{ role: 'user', content: 'warm' }] },
    })
    if ((await warm.text()).endsWith('data: [DONE]\n\n')) break
    await Bun.sleep(100)
  }
  const spentBefore = await stack.store.hget(stack.keys.account(buyer.accountId), 'spent')
  proxy.refuse(CLEAR, 'ERR user_script:1: refused')
  const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', stream: true, messages: [{ role: 'user', content: 'hi' }] },
  })
  const data = frames(await response.text()) as { error?: { code: string; message: string } }[]
  expect(data.at(-1)!.error!.code).toBe('settle_failed')
  expect(data.at(-1)!.error!.message).toContain('nothing was charged')
  expect(await stack.store.hget(stack.keys.account(buyer.accountId), 'spent')).toBe(spentBefore)
})
