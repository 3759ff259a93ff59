// Hostile input on every body-taking route: oversized, deeply nested and random JSON, random
// paths and query strings. Never a 500, never a stack trace, always the error shape, and nothing
// changes in Redis on a refusal.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { expectShapedRefusal } from '../helpers/refusals.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
beforeAll(async () => {
  stack = await startStack({ env: { SVC_MAX_BODY_BYTES: '65536' } })
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack)
})
afterAll(() => stack.stop())

const BUYER_POSTS = [
  '/v1/chat/completions',
  '/v1/responses',
  '/v1/messages',
  '/v1/messages/count_tokens',
  '/v1/images/generations',
  '/v1/video/quote',
  '/v1/video/queue',
  '/v1/video/retrieve',
  '/v1/agent/keys',
]

// Money and market keys only: lastUsedAt on the key and the capacity snapshot move on their own.
const moneyKeys = async () =>
  Object.fromEntries(
    Object.entries(await snapshotKeys(stack.store, stack.keys.prefix)).filter(
      ([k]) => !k.includes(':apikey:') && !k.includes(':capacity:'),
    ),
  )

describe('limits', () => {
  test('a body over the limit: 413 in the error shape, before it is read', async () => {
    const before = await moneyKeys()
    const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'x'.repeat(100_000) }] },
    })
    expect(response.status).toBe(413)
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('body_too_large')
    expect(await moneyKeys()).toEqual(before)
  })

  // In pieces, as a stream: fetch then sends Transfer-Encoding: chunked and no length.
  const chunked = (json: unknown) => {
    const bytes = new TextEncoder().encode(JSON.stringify(json))
    return new ReadableStream<Uint8Array>({
      start(controller) {
        for (let at = 0; at < bytes.length; at += 8192) controller.enqueue(bytes.slice(at, at + 8192))
        controller.close()
      },
    })
  }
  const postChunked = (path: string, json: unknown) =>
    keyFetch(stack, buyer.apiKey, path, {
      method: 'POST',
      body: chunked(json),
      headers: { 'content-type': 'application/json' },
    })

  test('a chunked body (no Content-Length) past the limit: the same 413, while it is read', async () => {
    const before = await moneyKeys()
    const response = await postChunked('/v1/chat/completions', {
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'x'.repeat(100_000) }],
      max_tokens: 8,
    })
    expect(response.status).toBe(413)
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('body_too_large')
    expect(await moneyKeys()).toEqual(before)
    // Within the limit, a chunked body is read as any other.
    const minted = await postChunked('/v1/agent/keys', { name: 'chunked '.repeat(8).trim() })
    expect(minted.status).toBe(201)
  })

  test('a chunked body that never ends: the 413 comes while it is still being sent', async () => {
    const before = await moneyKeys()
    const { hostname, host, port } = new URL(stack.url)
    // Chunks of JSON-looking text sent until the gateway answers: read whole, it would never end.
    const piece = `2000\r\n${'x'.repeat(0x2000)}\r\n`
    const GIVE_UP = 256 * 1024 * 1024
    let answer = ''
    let sent = 0
    const answered = Promise.withResolvers<void>()
    const socket = await Bun.connect({
      hostname: hostname.replace(/^\[|\]$/g, ''),
      port: Number(port),
      socket: {
        data(_socket, data) {
          answer += data.toString()
          answered.resolve()
        },
        close() {
          answered.resolve()
        },
        error() {
          answered.resolve()
        },
      },
    })
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${buyer.apiKey}\r\n` +
        'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\na\r\n{"model":"\r\n',
    )
    let done = false
    void answered.promise.then(() => {
      done = true
    })
    while (!done && sent < GIVE_UP) {
      // write() takes what the socket buffers now; wait for room before the next piece
      if (socket.write(piece) < piece.length) await Bun.sleep(1)
      else sent += piece.length
    }
    socket.end()
    expect(sent).toBeLessThan(GIVE_UP)
    expect(answer).toStartWith('HTTP/1.1 413')
    expect(answer).toContain('body_too_large')
    expect(await moneyKeys()).toEqual(before)
  })

  test('JSON nested past 64 levels: 400 json_too_deep', async () => {
    let deep: unknown = 'x'
    for (let i = 0; i < 200; i++) deep = [deep]
    const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi', extra: deep }] },
    })
    expect(response.status).toBe(400)
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('json_too_deep')
  })
})

describe('header limits', () => {
  test('headers past the server limit: 431, and the next request is served as usual', async () => {
    const huge = await fetch(`${stack.url}/v1/models`, { headers: { 'x-padding': 'a'.repeat(100_000) } })
    expect(huge.status).toBe(431)
    expect((await fetch(`${stack.url}/v1/models`)).status).toBe(200)
  })
})

describe('fuzzing', () => {
  test('random JSON bodies on every buyer POST route: shaped 4xx, no money moves', async () => {
    const before = await moneyKeys()
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...BUYER_POSTS), fc.jsonValue({ maxDepth: 4 }), async (path, body) => {
        const response = await keyFetch(stack, buyer.apiKey, path, { method: 'POST', json: body })
        if (response.status < 400) {
          // only a well-formed key mint can pass; anything paid would need a model and messages
          expect(path).toBe('/v1/agent/keys')
          await response.arrayBuffer()
          return
        }
        await expectShapedRefusal(response)
      }),
      { numRuns: 150 },
    )
    const after = await moneyKeys()
    for (const key of Object.keys(after)) {
      if (key.includes(':acct:') && key.endsWith(':keys')) continue // a fuzzed key name may have minted
      if (key.includes(':apikey')) continue
      expect(after[key]).toBe(before[key]!)
    }
  })

  test('near-miss chat bodies (right fields, wrong values): shaped 4xx', async () => {
    const near = fc.record(
      {
        model: fc.oneof(
          fc.constantFrom('llama-3.3-70b', 'svc/llama-3.3-70b', 'flux-dev', ''),
          fc.string(),
          fc.integer(),
        ),
        messages: fc.oneof(
          fc.constant([]),
          fc.array(
            fc.record({
              role: fc.oneof(fc.constantFrom('user', 'robot'), fc.integer()),
              content: fc.oneof(fc.string(), fc.integer(), fc.constant(null)),
            }),
            { maxLength: 3 },
          ),
          fc.string(),
        ),
        max_tokens: fc.oneof(fc.integer({ min: -5, max: 20_000 }), fc.double(), fc.string()),
        stream: fc.oneof(fc.boolean(), fc.string()),
      },
      { requiredKeys: [] },
    )
    await fc.assert(
      fc.asyncProperty(near, async (body) => {
        const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
          method: 'POST',
          json: body,
        })
        if (response.status === 200) {
          await response.arrayBuffer() // a body that happened to be valid was served and paid: fine
          return
        }
        await expectShapedRefusal(response)
      }),
      { numRuns: 150 },
    )
  })

  test('random JSON bodies on the operator routes: shaped 4xx, or a valid change', async () => {
    const offer = await simOffer(stack, 55)
    const routes: [string, string][] = [
      ['POST', '/admin/v1/offers'],
      ['PATCH', `/admin/v1/offers/${offer.id}`],
      ['POST', '/admin/v1/accounts'],
      ['POST', `/admin/v1/accounts/${buyer.accountId}/credit`],
    ]
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...routes),
        fc.jsonValue({ maxDepth: 3 }),
        async ([method, path], body) => {
          const response = await fetch(`${stack.url}${path}`, {
            method,
            headers: {
              authorization: `Bearer ${stack.config.adminToken}`,
              'content-type': 'application/json',
            },
            body: JSON.stringify(body),
          })
          if (response.status < 400) {
            await response.arrayBuffer()
            return
          }
          await expectShapedRefusal(response)
        },
      ),
      { numRuns: 120 },
    )
  })

  test('random headers on a paid route: never a 500, never money moved without a valid key', async () => {
    const before = await moneyKeys()
    const headerValue = fc.oneof(
      fc.string({ maxLength: 200 }).filter((v) => /^[\x20-\x7e]*$/.test(v)),
      fc.constantFrom('Bearer', 'Bearer ', 'bearer svc_', `Basic ${btoa('a:b')}`, 'Bearer svc_x y'),
    )
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          authorization: headerValue,
          'content-type': headerValue,
          cookie: fc.option(headerValue),
        }),
        async ({ cookie, ...headers }) => {
          const response = await fetch(`${stack.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { ...headers, ...(cookie === null ? {} : { cookie }) },
            body: JSON.stringify({ model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }] }),
          })
          await expectShapedRefusal(response)
        },
      ),
      { numRuns: 150 },
    )
    expect(await moneyKeys()).toEqual(before)
  })

  test('random paths and query strings: never a 500', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.webPath(),
        fc.webQueryParameters(),
        fc.constantFrom('GET', 'POST', 'DELETE', 'PATCH'),
        async (path, query, method) => {
          const url = `${stack.url}/v1${path}${query ? `?${query}` : ''}`
          const response = await fetch(url, { method, headers: { authorization: `Bearer ${buyer.apiKey}` } })
          expect(response.status).toBeLessThan(500)
          await response.arrayBuffer()
        },
      ),
      { numRuns: 200 },
    )
  })
})
