// Requests whose params are not what their method takes, sent with the official MCP SDK client
// over real HTTP: each is JSON-RPC's Invalid params (-32602) naming what is wrong, or Method not
// found (-32601) for a tool call asked to run as a task, never Internal error (-32603), and none of
// them runs a tool or changes anything in Redis.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import {
  CallToolResultSchema,
  EmptyResultSchema,
  ErrorCode,
  InitializeResultSchema,
  ListToolsResultSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js'
import { balances, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier } from '../helpers/suppliers.ts'

let stack: TestStack
let buyer: Awaited<ReturnType<typeof fundedBuyer>>
let client: Client
let supplierClient: Client

async function connect(apiKey: string): Promise<Client> {
  const mcp = new Client({ name: 'svc-test-params', version: '1.0.0' })
  await mcp.connect(
    new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${apiKey}` } },
    }),
  )
  return mcp
}

/** The JSON-RPC error a request is answered with (the SDK client rejects with it). */
async function refusal(answer: Promise<unknown>): Promise<McpError> {
  const error = await answer.then(
    () => null,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(McpError)
  return error as McpError
}

/** A tools/call with params as given, past the client's types. */
const toolsCall = (params: unknown, mcp = client) =>
  mcp.request({ method: 'tools/call', params } as never, CallToolResultSchema)

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 9 } })
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '5.000000')
  client = await connect(buyer.apiKey)
  supplierClient = await connect((await signInSupplier(stack)).apiKey)
})
afterAll(async () => {
  await client.close()
  await supplierClient.close()
  await stack.stop()
})

describe('tools/call', () => {
  test('arguments that are not an object, or a name that is not a string, are Invalid params naming the field', async () => {
    const before = await snapshotKeys(stack.store, stack.config.redisPrefix)
    const money = await balances(stack, buyer.accountId)
    const chat = { model: 'llama-3.3-70b', prompt: 'hi', max_tokens: 8 }
    const cases: [unknown, string][] = [
      [{ name: 'chat', arguments: 'model=llama-3.3-70b' }, 'arguments'],
      [{ name: 'chat', arguments: [chat] }, 'arguments'],
      [{ name: 'set_max_price', arguments: null }, 'arguments'],
      [{ name: 'set_max_price', arguments: 45 }, 'arguments'],
      [{ name: 7, arguments: chat }, 'name'],
      [{ name: ['chat'], arguments: chat }, 'name'],
      [{ arguments: chat }, 'name'],
      [{ name: 'drop_tables', arguments: {} }, "unknown tool 'drop_tables'"],
    ]
    for (const [params, field] of cases) {
      const error = await refusal(toolsCall(params))
      expect(error.code, JSON.stringify(params)).toBe(ErrorCode.InvalidParams)
      expect(error.message).toContain(field)
    }
    for (const params of [
      { name: 'request_payout', arguments: 'amountUsdc=1' },
      { name: 'post_offer', arguments: [] },
    ]) {
      expect((await refusal(toolsCall(params, supplierClient))).code).toBe(ErrorCode.InvalidParams)
    }
    expect(await balances(stack, buyer.accountId)).toEqual(money)
    expect(await snapshotKeys(stack.store, stack.config.redisPrefix)).toEqual(before)
  })

  test("an unknown tool's name is echoed capped, whole characters only, whatever its length", async () => {
    const before = await snapshotKeys(stack.store, stack.config.redisPrefix)
    for (const name of ['x'.repeat(2 * 1024 * 1024), `${'a'.repeat(99)}${'😀'.repeat(50_000)}`]) {
      const error = await refusal(toolsCall({ name, arguments: {} }))
      expect(error.code).toBe(ErrorCode.InvalidParams)
      expect(error.message).toContain(`unknown tool '${Array.from(name).slice(0, 100).join('')}…'`)
      expect(error.message.length).toBeLessThan(300)
      expect(error.message.isWellFormed()).toBe(true)
    }
    // A name within the cap is echoed whole.
    const named = await refusal(toolsCall({ name: 'n'.repeat(100), arguments: {} }))
    expect(named.message).toContain(`unknown tool '${'n'.repeat(100)}';`)
    expect(await snapshotKeys(stack.store, stack.config.redisPrefix)).toEqual(before)
  })

  test('a call asked to run as a task is Method not found: no tool here runs as one, and the chat is not run', async () => {
    const before = await snapshotKeys(stack.store, stack.config.redisPrefix)
    for (const task of [{}, { ttl: 60_000 }]) {
      const error = await refusal(
        toolsCall({ name: 'chat', arguments: { model: 'llama-3.3-70b', prompt: 'hi' }, task }),
      )
      expect(error.code).toBe(ErrorCode.MethodNotFound)
      expect(error.message).toContain('task')
    }
    // A task that is not even an object is Invalid params.
    const error = await refusal(toolsCall({ name: 'agent_me', arguments: {}, task: 'now' }))
    expect(error.code).toBe(ErrorCode.InvalidParams)
    expect(error.message).toContain('task')
    expect(await snapshotKeys(stack.store, stack.config.redisPrefix)).toEqual(before)
  })

  test('a good call on the same connection is still answered', async () => {
    const me = await client.callTool({ name: 'agent_me', arguments: {} })
    expect(me.isError).toBeFalsy()
    expect((me.structuredContent as { accountId: string }).accountId).toBe(buyer.accountId)
  })
})

describe('the other methods', () => {
  test('tools/list with a cursor that is not a string is Invalid params', async () => {
    for (const cursor of [5, { page: 2 }]) {
      const error = await refusal(
        client.request({ method: 'tools/list', params: { cursor } } as never, ListToolsResultSchema),
      )
      expect(error.code).toBe(ErrorCode.InvalidParams)
      expect(error.message).toContain('cursor')
    }
  })

  test('initialize without a protocol version or client info is Invalid params', async () => {
    for (const params of [
      {},
      { protocolVersion: 20250618, capabilities: {}, clientInfo: { name: 'x', version: '1' } },
      { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: 'x' },
    ]) {
      const error = await refusal(
        client.request({ method: 'initialize', params } as never, InitializeResultSchema),
      )
      expect(error.code, JSON.stringify(params)).toBe(ErrorCode.InvalidParams)
    }
    // A ping is still answered.
    expect(await client.request({ method: 'ping' }, EmptyResultSchema)).toEqual({})
  })
})
