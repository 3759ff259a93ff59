// The streamable HTTP transport of /mcp as a probing caller meets it: raw POSTs (a browser page's
// Origin, JSON-RPC batches) and the official MCP SDK client, over real HTTP.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import {
  StreamableHTTPClientTransport,
  type StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { formatMicros } from '../../src/money/units.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 9 } })
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(() => stack.stop())

const ACCEPT = 'application/json, text/event-stream'
const callOf = (id: number, name: string, args: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args },
})
const chatCall = (id: number) => callOf(id, 'chat', { model: 'llama-3.3-70b', prompt: 'hi', max_tokens: 8 })

/** One POST of JSON-RPC to /mcp with the buyer's key; a hung answer fails the test, not the run. */
function rpc(body: unknown, headers: Record<string, string> = {}, apiKey: string | null = buyer.apiKey) {
  return keyFetch(stack, apiKey, '/mcp', {
    method: 'POST',
    headers: { accept: ACCEPT, ...headers },
    json: body,
    signal: AbortSignal.timeout(60_000),
  })
}

type Answer = {
  id: number | string
  result?: { isError?: boolean; structuredContent: Record<string, unknown> }
}

describe('Origin', () => {
  test("a browser page on another origin is refused 403, with a good key or none; the gateway's own is let in", async () => {
    // DNS rebinding: a page on evil.example whose name resolves to the gateway's address.
    const own = new URL(stack.config.publicUrl).origin
    const before = await snapshotKeys(stack.store, stack.config.redisPrefix)
    for (const origin of ['http://evil.example', 'null', `${own}.evil.example`]) {
      for (const apiKey of [buyer.apiKey, null]) {
        const answer = await rpc(callOf(1, 'set_max_price', { maxPriceCents: 60 }), { origin }, apiKey)
        expect(answer.status).toBe(403)
        expect(((await answer.json()) as { error: { code: string } }).error.code).toBe('origin_not_allowed')
      }
      for (const method of ['GET', 'DELETE']) {
        const answer = await keyFetch(stack, buyer.apiKey, '/mcp', {
          method,
          headers: { origin, accept: ACCEPT },
        })
        expect(answer.status).toBe(403)
      }
    }
    expect(await snapshotKeys(stack.store, stack.config.redisPrefix)).toEqual(before)

    const browser = (origin: string) =>
      new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${buyer.apiKey}`, origin } },
      })
    const refused = await new Client({ name: 'svc-test', version: '1.0.0' })
      .connect(browser('http://evil.example'))
      .then(
        () => null,
        (e: unknown) => e,
      )
    expect((refused as StreamableHTTPError).code).toBe(403)
    const client = new Client({ name: 'svc-test', version: '1.0.0' })
    await client.connect(browser(own))
    const me = await client.callTool({ name: 'agent_me', arguments: {} })
    expect((me.structuredContent as { accountId: string }).accountId).toBe(buyer.accountId)
    await client.close()
  })
})

describe('batches', () => {
  test('a batch of requests answers each of them', async () => {
    const answer = await rpc([callOf(1, 'agent_me'), callOf(2, 'list_models')])
    expect(answer.status).toBe(200)
    const answers = (await answer.json()) as Answer[]
    expect(answers.map((a) => a.id).sort()).toEqual([1, 2])
    expect(answers.every((a) => a.result && !a.result.isError)).toBe(true)
  })

  test('a cancellation in the batch of the request it names is ignored: the request is answered, and charged what it answers', async () => {
    const before = await balances(stack, buyer.accountId)
    const answer = await rpc([
      chatCall(1),
      {
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: 1, reason: 'changed my mind' },
      },
    ])
    expect(answer.status).toBe(200)
    // The one request's answer (the transport answers a batch of one request with the bare answer).
    const chat = (await answer.json()) as Answer
    expect(chat.id).toBe(1)
    expect(chat.result!.isError).toBeUndefined()
    const cost = chat.result!.structuredContent.costUsdc as string
    expect(cost).toMatch(/^0\.\d{6}$/)
    expect(formatMicros(before.confirmed - (await balances(stack, buyer.accountId)).confirmed)).toBe(cost)
  })

  test('an empty batch, or two requests of one batch with one id, is a JSON-RPC Invalid Request: nothing runs', async () => {
    const before = await snapshotKeys(stack.store, stack.config.redisPrefix)
    for (const batch of [[], [chatCall(7), chatCall(7)], [callOf(3, 'agent_me'), chatCall(3)]]) {
      const answer = await rpc(batch)
      expect(answer.status).toBe(400)
      const body = (await answer.json()) as {
        jsonrpc: string
        id: null
        error: { code: number; message: string }
      }
      expect(body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } })
    }
    expect(await snapshotKeys(stack.store, stack.config.redisPrefix)).toEqual(before)
    // Ids of different types are different ids.
    const answer = await rpc([callOf(4, 'agent_me'), { ...callOf(4, 'list_models'), id: '4' }])
    expect(((await answer.json()) as Answer[]).map((a) => a.id).sort()).toEqual([4, '4'])
  })
})

describe('protocol versions without batches', () => {
  test('a batch under MCP-Protocol-Version 2025-06-18 or later is a JSON-RPC Invalid Request: nothing runs', async () => {
    const before = await snapshotKeys(stack.store, stack.config.redisPrefix)
    for (const version of ['2025-06-18', '2025-11-25']) {
      const answer = await rpc([chatCall(1), callOf(2, 'agent_me')], { 'mcp-protocol-version': version })
      expect(answer.status).toBe(400)
      expect(await answer.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } })
    }
    expect(await snapshotKeys(stack.store, stack.config.redisPrefix)).toEqual(before)
  })

  test('a batch under 2025-03-26, the version a client without the header speaks, is answered', async () => {
    const answer = await rpc([callOf(1, 'agent_me'), callOf(2, 'list_models')], {
      'mcp-protocol-version': '2025-03-26',
    })
    expect(answer.status).toBe(200)
    expect(((await answer.json()) as Answer[]).map((a) => a.id).sort()).toEqual([1, 2])
  })
})

test('JSON that is not a JSON-RPC message, alone or in a batch, is an Invalid Request, not a Parse error', async () => {
  for (const body of [{ hello: 1 }, 42, [{ hello: 1 }], [callOf(1, 'agent_me'), 'x']]) {
    const answer = await rpc(body)
    expect(answer.status).toBe(400)
    expect(await answer.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } })
  }
})

test('PUT, PATCH and OPTIONS are 405 with Allow: POST, as GET and DELETE are', async () => {
  for (const method of ['PUT', 'PATCH', 'OPTIONS', 'GET', 'DELETE']) {
    const answer = await keyFetch(stack, buyer.apiKey, '/mcp', { method, headers: { accept: ACCEPT } })
    expect(answer.status, method).toBe(405)
    expect(answer.headers.get('allow'), method).toBe('POST')
    expect(((await answer.json()) as { error: { code: string } }).error.code).toBe('method_not_allowed')
  }
})
