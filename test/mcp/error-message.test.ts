// A JSON-RPC error of /mcp carries its message once: the official MCP SDK client puts its own
// "MCP error <code>: " before what the wire says, so the wire's message is the bare sentence, and
// the client's error reads it with one prefix. Over real HTTP, with the SDK client and raw POSTs.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import {
  CallToolResultSchema,
  ErrorCode,
  ListToolsResultSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
let client: Client

beforeAll(async () => {
  stack = await startStack()
  buyer = await fundedBuyer(stack, '1.000000')
  client = new Client({ name: 'svc-test-errors', version: '1.0.0' })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${buyer.apiKey}` } },
    }),
  )
})
afterAll(async () => {
  await client.close()
  await stack.stop()
})

// Requests each refused by the server with a JSON-RPC error, its code, and a word of its message.
const REFUSED: [string, Record<string, unknown>, number, string][] = [
  [
    'tools/call',
    { name: 'drop_tables', arguments: {} },
    ErrorCode.InvalidParams,
    "unknown tool 'drop_tables'",
  ],
  ['tools/call', { name: 7, arguments: {} }, ErrorCode.InvalidParams, 'name'],
  ['tools/list', { cursor: 5 }, ErrorCode.InvalidParams, 'cursor'],
  ['tools/call', { name: 'agent_me', arguments: {}, task: {} }, ErrorCode.MethodNotFound, 'task'],
]

test("the SDK client's error names its code once; the wire's message is the sentence alone", async () => {
  for (const [method, params, code, word] of REFUSED) {
    const schema = method === 'tools/list' ? ListToolsResultSchema : CallToolResultSchema
    const error = await client.request({ method, params } as never, schema).then(
      () => null,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(McpError)
    const { message } = error as McpError
    expect((error as McpError).code).toBe(code)
    expect(message).toStartWith(`MCP error ${code}: `)
    expect(message.slice(`MCP error ${code}: `.length), message).not.toContain('MCP error')
    expect(message).toContain(word)

    const answer = await keyFetch(stack, buyer.apiKey, '/mcp', {
      method: 'POST',
      headers: { accept: 'application/json, text/event-stream' },
      json: { jsonrpc: '2.0', id: 1, method, params },
    })
    const text = await answer.text()
    const data = text.startsWith('{') ? text : text.slice(text.indexOf('data: ') + 6)
    const wire = (JSON.parse(data) as { error: { code: number; message: string } }).error
    expect(wire.code).toBe(code)
    expect(wire.message).toBe(message.slice(`MCP error ${code}: `.length))
  }
})
