// The supplier tools of the hosted MCP server, with the official MCP SDK client over real HTTP:
// a `sup_` key is offered exactly the supplier tools, a buyer key none of the supplier's own (the
// webhook tools share the buyer's names, each answering its caller's own), and each tool answers as
// the route it stands for.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import {
  StreamableHTTPClientTransport,
  type StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'

const SUPPLIER_ONLY_TOOL_NAMES = [
  'list_fills',
  'list_offers',
  'list_payouts',
  'post_offer',
  'request_payout',
  'supplier_me',
  'update_offer',
]
// The webhook tools have the buyer's names: each answers its caller's own endpoints and events.
const SUPPLIER_TOOL_NAMES = [...SUPPLIER_ONLY_TOOL_NAMES, 'list_webhook_events', 'list_webhooks'].sort()

let stack: TestStack
let supplier: TestSupplier
let buyer: TestAccount
let client: Client
const clients: Client[] = []

async function connect(apiKey: string): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${apiKey}` } },
  })
  const mcp = new Client({ name: 'svc-test-supplier', version: '1.0.0' })
  await mcp.connect(transport)
  clients.push(mcp)
  return mcp
}

type Result = CallToolResult & { structuredContent: Record<string, unknown> }
const call = async (name: string, args: Record<string, unknown> = {}, mcp = client) =>
  (await mcp.callTool({ name, arguments: args })) as Result

function failure(result: Result) {
  expect(result.isError).toBe(true)
  const data = result.structuredContent as { status?: number; error: { code: string } }
  return { status: data.status, code: data.error.code }
}

beforeAll(async () => {
  // A webhook test's endpoint is a public address that answers nothing: its tries end soon.
  stack = await startStack({ sim: { outputTokens: 9 }, env: { SVC_WEBHOOK_TIMEOUT_MS: '100' } })
  supplier = await signInSupplier(stack)
  buyer = await fundedBuyer(stack, '5')
  client = await connect(supplier.apiKey)
})
afterAll(async () => {
  for (const c of clients) await c.close()
  await stack.stop()
})

describe('supplier tools', () => {
  test("a supplier key is offered exactly the supplier tools; a buyer key none of the supplier's own", async () => {
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name).sort()).toEqual(SUPPLIER_TOOL_NAMES)
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe('object')
      expect(tool.description!.length).toBeGreaterThan(20)
    }
    expect(client.getInstructions()).toContain('supplier_me')
    const buyerTools = (await (await connect(buyer.apiKey)).listTools()).tools.map((t) => t.name)
    expect(buyerTools).toContain('agent_me')
    for (const name of SUPPLIER_ONLY_TOOL_NAMES) expect(buyerTools).not.toContain(name)
    await expect(call('agent_me')).rejects.toThrow(/unknown tool 'agent_me'/)
    await expect(call('chat', { model: 'llama-3.3-70b', prompt: 'hi' })).rejects.toThrow(/unknown tool/)
  })

  test('a revoked or malformed supplier key cannot connect: 401', async () => {
    for (const key of ['sup_notarealkeyatallnotarealkeyatallnotarealk', 'sup_x']) {
      const error = await connect(key).then(
        () => null,
        (e: unknown) => e,
      )
      expect((error as StreamableHTTPError).code).toBe(401)
    }
  })

  test('post, list, update and fills answer as their routes; refusals are tool errors with the code', async () => {
    const upstreamApiKey = `venice-${randomUUID()}`
    const posted = await call('post_offer', { upstreamApiKey, askCents: 42, capacityDiem: '20' })
    expect(posted.isError).toBeUndefined()
    expect(JSON.stringify(posted)).not.toContain(upstreamApiKey)
    const offerId = posted.structuredContent.id as string
    expect(posted.structuredContent).toMatchObject({
      askCents: 42,
      status: 'active',
      capacityDiem: '20.000000',
    })
    expect(failure(await call('post_offer', { upstreamApiKey, askCents: 42, capacityDiem: '1' }))).toEqual({
      status: 409,
      code: 'upstream_key_in_use',
    })
    const rejectedKey = `venice-${randomUUID()}`
    await fetch(`${stack.sim.url}/sim/keys/${rejectedKey}`, {
      method: 'PUT',
      body: JSON.stringify({ revoked: true }),
    })
    expect(
      failure(await call('post_offer', { upstreamApiKey: rejectedKey, askCents: 42, capacityDiem: '1' })),
    ).toEqual({ status: 400, code: 'upstream_key_rejected' })
    expect(
      failure(await call('post_offer', { upstreamApiKey: 'k', askCents: 90, capacityDiem: '1' })).code,
    ).toBe('invalid_arguments')

    const listed = await call('list_offers')
    const route = await (await keyFetch(stack, supplier.apiKey, '/v1/supplier/offers')).json()
    expect(listed.structuredContent).toEqual(route as Record<string, unknown>)

    expect(failure(await call('update_offer', { id: offerId })).code).toBe('invalid_arguments')
    expect(failure(await call('update_offer', { id: randomUUID(), askCents: 40 }))).toEqual({
      status: 404,
      code: 'offer_not_found',
    })
    const paused = await call('update_offer', { id: offerId, status: 'paused' })
    expect(paused.structuredContent.status).toBe('paused')
    expect(await stack.store.zscore(stack.keys.ladder, offerId)).toBeNull()
    const active = await call('update_offer', { id: offerId, status: 'active', askCents: 39 })
    expect(active.structuredContent).toMatchObject({ status: 'active', askCents: 39 })

    const chat = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 },
    })
    expect(chat.status).toBe(200)
    const cost = chat.headers.get('x-svc-cost-usdc')
    const fills = await call('list_fills', { limit: 10 })
    expect(fills.structuredContent).toMatchObject({
      object: 'list',
      data: [{ offerId, clearingPriceCents: 39, earnedUsdc: cost }],
      nextCursor: null,
    })
    expect(failure(await call('list_fills', { limit: 500 })).code).toBe('invalid_arguments')
    const me = await call('supplier_me')
    const meRoute = await (await keyFetch(stack, supplier.apiKey, '/v1/supplier/me')).json()
    expect(me.structuredContent).toEqual(meRoute as Record<string, unknown>)
    expect(me.structuredContent.earnedUsdc).toBe(cost)
  })

  test('payout tools without a payout wallet: request_payout answers the route 503, its key required', async () => {
    expect(failure(await call('request_payout', { amountUsdc: '1.000000' })).code).toBe('invalid_arguments')
    expect(
      failure(await call('request_payout', { amountUsdc: '1.000000', idempotencyKey: 'a b' })).code,
    ).toBe('invalid_arguments')
    expect(failure(await call('request_payout', { amountUsdc: '1.000000', idempotencyKey: 'k-1' }))).toEqual({
      status: 503,
      code: 'payouts_unavailable',
    })
    const listed = await call('list_payouts', { limit: 5 })
    expect(listed.structuredContent).toEqual({ object: 'list', data: [], nextCursor: null })
  })
  test("list_webhooks and list_webhook_events answer the supplier's own, as their routes do", async () => {
    // A public address (TEST-NET-1): it registers; its deliveries fail, which the list shows.
    const created = await keyFetch(stack, supplier.apiKey, '/v1/supplier/webhooks', {
      method: 'POST',
      json: { url: 'http://192.0.2.1/hook', events: ['supplier.suspended', 'supplier.reinstated'] },
    })
    expect(created.status).toBe(201)
    const endpointId = ((await created.json()) as { id: string }).id
    for (const status of ['suspended', 'active']) {
      const changed = await adminFetch(stack, `/admin/v1/suppliers/${supplier.supplierId}`, {
        method: 'PATCH',
        json: { status },
      })
      expect(changed.status).toBe(200)
    }
    const hooks = await call('list_webhooks')
    const hooksRoute = await (await keyFetch(stack, supplier.apiKey, '/v1/supplier/webhooks')).json()
    expect(hooks.structuredContent).toEqual(hooksRoute as Record<string, unknown>)
    expect((hooks.structuredContent.webhooks as { id: string }[]).map((w) => w.id)).toEqual([endpointId])

    type Page = { data: { id: string; type: string; data: unknown; deliveries: { endpointId: string }[] }[] }
    // The delivery state moves on as the consumer tries: the events themselves are compared.
    const events = (ofPage: Page) =>
      ofPage.data.map(({ id, type, data, deliveries }) => ({
        id,
        type,
        data,
        endpoints: deliveries.map((d) => d.endpointId),
      }))
    const listed = (await call('list_webhook_events', { limit: 5 })).structuredContent as unknown as Page
    const route = (await (
      await keyFetch(stack, supplier.apiKey, '/v1/supplier/events?limit=5')
    ).json()) as Page
    expect(events(listed)).toEqual(events(route))
    expect(events(listed)).toEqual([
      expect.objectContaining({ type: 'supplier.reinstated', endpoints: [endpointId] }),
      expect.objectContaining({ type: 'supplier.suspended', endpoints: [endpointId] }),
    ])
    // The buyer's tool of the same name answers the buyer's own: none of the supplier's.
    const buyerEvents = await call('list_webhook_events', {}, await connect(buyer.apiKey))
    expect(buyerEvents.structuredContent).toMatchObject({ object: 'list', data: [] })
    expect(failure(await call('list_webhook_events', { limit: 0 })).code).toBe('invalid_arguments')
  })
})
