// The hosted MCP server end to end: the official MCP SDK client over real HTTP to /mcp, every
// tool called with good and bad input, and the same answers as the HTTP routes it stands for.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { formatMicros } from '../../src/money/units.ts'
import { createAccount, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
let client: Client

async function connect(
  apiKey: string | null,
  header: 'authorization' | 'x-api-key' = 'authorization',
): Promise<Client> {
  const headers: Record<string, string> =
    apiKey === null
      ? {}
      : header === 'authorization'
        ? { authorization: `Bearer ${apiKey}` }
        : { 'x-api-key': apiKey }
  const transport = new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
    requestInit: { headers },
  })
  const mcp = new Client({ name: 'svc-test', version: '1.0.0' })
  await mcp.connect(transport)
  return mcp
}

async function call(name: string, args: Record<string, unknown> = {}, mcp = client) {
  return (await mcp.callTool({ name, arguments: args })) as CallToolResult & {
    structuredContent: Record<string, unknown>
  }
}

/** A tool error's HTTP status and error.code. */
function failure(result: CallToolResult & { structuredContent: Record<string, unknown> }) {
  expect(result.isError).toBe(true)
  const data = result.structuredContent as { status?: number; error: { code: string; message: string } }
  return { status: data.status, code: data.error.code, message: data.error.message }
}

beforeAll(async () => {
  // A webhook test's endpoint is a public address that answers nothing: its tries end soon.
  stack = await startStack({ sim: { outputTokens: 9 }, env: { SVC_WEBHOOK_TIMEOUT_MS: '100' } })
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '5.000000')
  client = await connect(buyer.apiKey)
})
afterAll(async () => {
  await client.close()
  await stack.stop()
})

describe('connecting', () => {
  test('the server names itself and lists every tool with an object input schema', async () => {
    expect(client.getServerVersion()?.name).toBe('svc-gateway')
    // An agent that speaks Anthropic learns the route exists from the instructions.
    expect(client.getInstructions()).toContain('POST /v1/messages')
    const { tools } = await client.listTools()
    expect(tools.map((tool) => tool.name).sort()).toEqual(
      [
        'agent_me',
        'capacity',
        'chat',
        'get_request',
        'get_usage',
        'list_activity',
        'list_keys',
        'list_key_budgets',
        'list_models',
        'list_webhook_events',
        'list_webhooks',
        'mint_key',
        'revoke_key',
        'set_key_budget',
        'set_key_limit',
        'set_max_price',
      ].sort(),
    )
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe('object')
      expect(tool.description!.length).toBeGreaterThan(20)
    }
    const chat = tools.find((tool) => tool.name === 'chat')!
    expect(chat.inputSchema.required).toEqual(['model'])
  })

  test("a key sent as Anthropic's x-api-key opens the same tools, each answering as that key", async () => {
    const mcp = await connect(buyer.apiKey, 'x-api-key')
    try {
      const me = await call('agent_me', {}, mcp)
      expect(me.isError).toBeFalsy()
      expect(me.structuredContent).toMatchObject({ accountId: buyer.accountId })
    } finally {
      await mcp.close()
    }
  })

  test('without a key, or with a bad one, the client cannot connect: 401', async () => {
    for (const key of [null, 'svc_notarealkeyatallnotarealkeyatallnotarealk']) {
      const error = await connect(key).then(
        () => null,
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(StreamableHTTPError)
      expect((error as StreamableHTTPError).code).toBe(401)
    }
  })

  test('a bare POST without a key gets the 401 in the error shape, before any JSON-RPC is read', async () => {
    const response = await keyFetch(stack, null, '/mcp', { method: 'POST', json: { jsonrpc: '2.0' } })
    expect(response.status).toBe(401)
    expect(response.headers.get('x-svc-request-id')).toMatch(/^req_/)
    const body = (await response.json()) as { error: { type: string; code: string } }
    expect(body.error).toMatchObject({ type: 'authentication_error', code: 'missing_api_key' })
  })

  test('GET and DELETE answer 405: the server is stateless, there is no stream or session', async () => {
    for (const method of ['GET', 'DELETE']) {
      const response = await keyFetch(stack, buyer.apiKey, '/mcp', {
        method,
        headers: { accept: 'text/event-stream' },
      })
      expect(response.status).toBe(405)
      expect(response.headers.get('allow')).toBe('POST')
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('method_not_allowed')
    }
  })
})

describe('account tools answer what the routes answer', () => {
  test('agent_me is GET /v1/agent/me', async () => {
    const result = await call('agent_me')
    expect(result.isError).toBeFalsy()
    const route = await (await keyFetch(stack, buyer.apiKey, '/v1/agent/me')).json()
    expect(result.structuredContent).toEqual(route as Record<string, unknown>)
    expect(result.structuredContent.accountId).toBe(buyer.accountId)
    expect(JSON.parse((result.content[0] as { text: string }).text)).toEqual(route)
  })

  test('list_models is GET /v1/models', async () => {
    const result = await call('list_models')
    const route = await (await fetch(`${stack.url}/v1/models`)).json()
    expect(result.structuredContent).toEqual(route as Record<string, unknown>)
    const ids = (result.structuredContent.data as { id: string }[]).map((row) => row.id)
    expect(ids).toContain('llama-3.3-70b')
  })

  test('capacity, whole and narrowed by maxPriceCents; out of range is a tool error', async () => {
    const whole = await call('capacity')
    expect(whole.structuredContent.cheapestPostedCents).toBe(40)
    const below = await call('capacity', { maxPriceCents: 35 })
    expect(below.structuredContent).toMatchObject({
      prices: [],
      cheapestPostedCents: null,
      routableDiem: '0.000000',
    })
    const wide = await call('capacity', { maxPriceCents: 80 })
    expect((wide.structuredContent.prices as { priceCentsPerDollar: number }[])[0]!.priceCentsPerDollar).toBe(
      40,
    )
    for (const bad of [90, 29, 45.5, '50']) {
      const result = await call('capacity', { maxPriceCents: bad })
      expect(failure(result).code).toBe('invalid_arguments')
      expect(failure(result).message).toContain('maxPriceCents')
    }
    expect(failure(await call('capacity', { maxPrice: 50 })).message).toContain('maxPrice')
  })

  test('set_max_price changes the max price; bad values change nothing', async () => {
    const before = await snapshotKeys(stack.store, stack.config.redisPrefix)
    for (const bad of [{ maxPriceCents: 81 }, { maxPriceCents: '50' }, {}]) {
      expect(failure(await call('set_max_price', bad)).code).toBe('invalid_arguments')
    }
    expect(await snapshotKeys(stack.store, stack.config.redisPrefix)).toEqual(before)
    const set = await call('set_max_price', { maxPriceCents: 45 })
    expect(set.isError).toBeFalsy()
    expect(set.structuredContent).toEqual({ maxPriceCents: 45 })
    expect((await call('agent_me')).structuredContent.maxPriceCents).toBe(45)
  })

  test('list_keys, mint_key and revoke_key manage the keys; errors carry the route status', async () => {
    const listed = await call('list_keys')
    expect(listed.structuredContent).toMatchObject({ activeApiKeyCount: 1, maxActiveApiKeys: 10 })
    const minted = await call('mint_key', { name: 'from mcp' })
    expect(minted.isError).toBeFalsy()
    const key = minted.structuredContent as { apiKey: string; id: string; name: string; keyPrefix: string }
    expect(key.apiKey).toStartWith('svc_')
    expect(key.name).toBe('from mcp')
    const after = await call('list_keys')
    expect(after.structuredContent.activeApiKeyCount).toBe(2)
    expect(JSON.stringify(after.structuredContent)).not.toContain(key.apiKey)

    expect(failure(await call('mint_key', { name: '' })).code).toBe('invalid_arguments')
    expect(failure(await call('mint_key', { name: 'x'.repeat(65) })).code).toBe('invalid_arguments')
    const unknown = failure(await call('revoke_key', { id: crypto.randomUUID() }))
    expect(unknown.status).toBe(404)

    expect((await call('revoke_key', { id: key.id })).structuredContent).toEqual({ status: 'ok' })
    expect((await call('list_keys')).structuredContent.activeApiKeyCount).toBe(1)
    expect((await keyFetch(stack, key.apiKey, '/v1/agent/me')).status).toBe(401)
  })

  test('mint_key takes a spending limit and set_key_limit changes it; a limited key is refused 403', async () => {
    const minted = await call('mint_key', { name: 'agent', limitUsdc: '0' })
    const key = minted.structuredContent as { apiKey: string; id: string; limitUsdc: string | null }
    expect(minted.structuredContent).toMatchObject({ limitUsdc: '0.000000', spentUsdc: '0.000000' })
    const agent = await connect(key.apiKey)
    const refused = failure(
      await call('chat', { model: 'llama-3.3-70b', prompt: 'hi', max_tokens: 8 }, agent),
    )
    expect(refused).toMatchObject({ status: 403, code: 'key_limit_exceeded' })
    const raised = await call('set_key_limit', { id: key.id, limitUsdc: '1.000000' })
    expect(raised.structuredContent).toMatchObject({
      id: key.id,
      limitUsdc: '1.000000',
      limitRemainingUsdc: '1.000000',
    })
    expect(
      (await call('chat', { model: 'llama-3.3-70b', prompt: 'hi', max_tokens: 8 }, agent)).isError,
    ).toBeFalsy()
    expect(
      (await call('set_key_limit', { id: key.id, limitUsdc: null })).structuredContent.limitUsdc,
    ).toBeNull()
    expect(failure(await call('set_key_limit', { id: key.id, limitUsdc: 5 })).code).toBe('invalid_arguments')
    expect(failure(await call('set_key_limit', { id: crypto.randomUUID(), limitUsdc: '1' })).status).toBe(404)
    await agent.close()
    await call('revoke_key', { id: key.id })
  })

  test('mint_key takes a limitReset, list_key_budgets reads each budget as GET /v1/agent/keys shows it, set_key_budget sets one', async () => {
    const minted = await call('mint_key', { name: 'daily-agent', limitUsdc: '0.5', limitReset: 'daily' })
    const key = minted.structuredContent as { apiKey: string; id: string }
    expect(minted.structuredContent).toMatchObject({
      limitUsdc: '0.500000',
      limitReset: 'daily',
      periodSpentUsdc: '0.000000',
    })
    const agent = await connect(key.apiKey)
    expect(
      (await call('chat', { model: 'llama-3.3-70b', prompt: 'hi', max_tokens: 8 }, agent)).isError,
    ).toBeFalsy()
    await agent.close()

    const budgets = (await call('list_key_budgets')).structuredContent.budgets as Record<string, unknown>[]
    const route = (await (await keyFetch(stack, buyer.apiKey, '/v1/agent/keys')).json()) as {
      activeApiKeys: Record<string, unknown>[]
    }
    const listed = route.activeApiKeys.find((k) => k.id === key.id)!
    const budget = budgets.find((b) => b.id === key.id)!
    expect(budget).toEqual({
      id: key.id,
      name: 'daily-agent',
      limitUsdc: '0.500000',
      limitReset: 'daily',
      spentUsdc: listed.spentUsdc,
      periodSpentUsdc: listed.spentUsdc,
      limitResetsAt: listed.limitResetsAt,
      limitRemainingUsdc: listed.limitRemainingUsdc,
    })
    expect(budget.spentUsdc).not.toBe('0.000000')
    expect(budgets).toHaveLength(route.activeApiKeys.length)

    const weekly = await call('set_key_budget', { id: key.id, limitUsdc: '2', limitReset: 'weekly' })
    expect(weekly.structuredContent).toMatchObject({ limitUsdc: '2.000000', limitReset: 'weekly' })
    expect(new Date(weekly.structuredContent.limitResetsAt as string).getUTCDay()).toBe(1)
    const lifetime = await call('set_key_budget', { id: key.id, limitUsdc: '2', limitReset: null })
    expect(lifetime.structuredContent).toMatchObject({ limitReset: null, limitResetsAt: null })
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    expect(
      failure(await call('set_key_budget', { id: key.id, limitUsdc: '2', limitReset: 'hourly' })).code,
    ).toBe('invalid_arguments')
    expect(failure(await call('mint_key', { name: 'x', limitReset: 'daily' }))).toMatchObject({
      status: 400,
      code: 'invalid_request',
    })
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
    await call('revoke_key', { id: key.id })
  })

  test('a limited key cannot lift its limit nor mint a key without one through the tools', async () => {
    const owner = await fundedBuyer(stack, '1.000000')
    const operator = await connect(owner.apiKey)
    const minted = await call('mint_key', { name: 'agent', limitUsdc: '1' }, operator)
    await operator.close()
    const key = minted.structuredContent as { apiKey: string; id: string }
    const agent = await connect(key.apiKey)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const lift = failure(await call('set_key_limit', { id: key.id, limitUsdc: null }, agent))
    expect(lift).toMatchObject({ status: 403, code: 'key_limit_binding' })
    const free = failure(await call('mint_key', { name: 'free' }, agent))
    expect(free).toMatchObject({ status: 403, code: 'key_limit_binding' })
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
    await agent.close()
  })

  test('list_activity and get_usage answer as the routes do', async () => {
    const served = await call('chat', { model: 'llama-3.3-70b', prompt: 'hi', max_tokens: 8 })
    const reference = served.structuredContent.supportReference
    const activity = await call('list_activity', { limit: 1 })
    expect(activity.structuredContent).toMatchObject({
      object: 'list',
      data: [{ supportReference: reference }],
    })
    const route = await keyFetch(stack, buyer.apiKey, '/v1/agent/activity?limit=1')
    expect(activity.structuredContent).toEqual((await route.json()) as Record<string, unknown>)
    const cursor = activity.structuredContent.nextCursor as string
    const older = await call('list_activity', { limit: 1, before: cursor })
    expect((older.structuredContent.data as { supportReference: string }[])[0]?.supportReference).not.toBe(
      reference,
    )
    expect(failure(await call('list_activity', { limit: 0 })).code).toBe('invalid_arguments')
    expect(failure(await call('list_activity', { before: 'nope' })).status).toBe(400)
    const usage = await call('get_usage', { window: '24h' })
    expect(usage.structuredContent).toMatchObject({ object: 'usage', window: '24h' })
    expect(failure(await call('get_usage', { window: '1h' })).code).toBe('invalid_arguments')
  })

  test('list_webhooks and list_webhook_events answer as their routes do; a bad page is refused', async () => {
    // An endpoint (a public address, TEST-NET-1: its deliveries fail) for a balance.low at the
    // balance as it stands: the next request takes the balance below it.
    const { confirmed } = await balances(stack, buyer.accountId)
    const created = await keyFetch(stack, buyer.apiKey, '/v1/agent/webhooks', {
      method: 'POST',
      json: {
        url: 'http://192.0.2.1/hook',
        events: ['balance.low'],
        balanceThresholdUsdc: formatMicros(confirmed),
      },
    })
    expect(created.status).toBe(201)
    const endpointId = ((await created.json()) as { id: string }).id
    const chat = await call('chat', { model: 'llama-3.3-70b', prompt: 'hi', max_tokens: 16 })
    expect(chat.isError).toBeUndefined()

    const listed = await call('list_webhooks')
    const route = await keyFetch(stack, buyer.apiKey, '/v1/agent/webhooks')
    expect(listed.structuredContent).toEqual((await route.json()) as Record<string, unknown>)
    expect((listed.structuredContent.webhooks as { id: string }[]).map((w) => w.id)).toContain(endpointId)
    type Page = { data: { id: string; type: string; data: unknown; deliveries: { endpointId: string }[] }[] }
    // The delivery state moves on as the consumer tries: the events themselves are compared.
    const eventsOf = (page: Page) =>
      page.data.map(({ id, type, data, deliveries }) => ({
        id,
        type,
        data,
        endpoints: deliveries.map((d) => d.endpointId),
      }))
    const events = await call('list_webhook_events', { limit: 5 })
    const eventsRoute = (await (
      await keyFetch(stack, buyer.apiKey, '/v1/agent/events?limit=5')
    ).json()) as Page
    expect(eventsOf(events.structuredContent as unknown as Page)).toEqual(eventsOf(eventsRoute))
    expect(eventsOf(eventsRoute)).toEqual([
      {
        id: expect.any(String),
        type: 'balance.low',
        data: { thresholdUsdc: formatMicros(confirmed), balanceUsdc: expect.any(String) },
        endpoints: [endpointId],
      },
    ])
    expect(events.structuredContent).toMatchObject({ object: 'list', nextCursor: null })
    expect(failure(await call('list_webhook_events', { limit: 0 })).code).toBe('invalid_arguments')
    expect(failure(await call('list_webhook_events', { before: 'nope' })).status).toBe(400)
  })

  test('a key revoked through its own MCP connection fails the next call with 401', async () => {
    const minted = (await call('mint_key', { name: 'short-lived' })).structuredContent as {
      apiKey: string
      id: string
    }
    const own = await connect(minted.apiKey)
    expect((await call('revoke_key', { id: minted.id }, own)).structuredContent).toEqual({ status: 'ok' })
    const error = await call('agent_me', {}, own).then(
      () => null,
      (e: unknown) => e,
    )
    expect((error as StreamableHTTPError).code).toBe(401)
    await own.close()
  })

  test('an unknown tool is a JSON-RPC error naming it', async () => {
    await expect(call('drop_tables')).rejects.toThrow(/unknown tool 'drop_tables'/)
  })
})

describe('chat', () => {
  test('runs a buffered completion and returns the text with its exact cost', async () => {
    const before = await balances(stack, buyer.accountId)
    const result = await call('chat', {
      model: 'svc/llama-3.3-70b',
      prompt: 'Name a market.',
      max_tokens: 50,
    })
    expect(result.isError).toBeFalsy()
    const data = result.structuredContent as {
      text: string
      usage: { prompt_tokens: number; completion_tokens: number }
      costUsdc: string
      clearingPriceCents: number
      supportReference: string
      balanceRemainingUsdc: string
    }
    expect(data.text.split(' ')).toHaveLength(9)
    expect(data.clearingPriceCents).toBe(40)
    expect(data.supportReference).toMatch(/^sr_/)
    const cost = expectedCost(data.usage, 40)
    expect(data.costUsdc).toBe(formatMicros(cost))
    const after = await balances(stack, buyer.accountId)
    expect(after.confirmed).toBe(before.confirmed - cost)
    expect(data.balanceRemainingUsdc).toBe(formatMicros(after.confirmed))
    expect((result.content[0] as { text: string }).text).toBe(data.text)
    expect((result.content[1] as { text: string }).text).toContain(data.costUsdc)

    const looked = await call('get_request', { supportReference: data.supportReference })
    expect(looked.isError).toBeFalsy()
    const route = await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${data.supportReference}`)
    expect(looked.structuredContent).toEqual((await route.json()) as Record<string, unknown>)
    expect(failure(await call('get_request', { supportReference: 'sr_nothere' })).status).toBe(404)
    // A dot or two would name the route above the record's, a lone surrogate no URL: no id.
    for (const supportReference of ['..', '.', '%2e%2E', 'sr_\ud800']) {
      expect(failure(await call('get_request', { supportReference })).code).toBe('invalid_arguments')
    }
  })

  test('takes messages as well as a prompt', async () => {
    const result = await call('chat', {
      model: 'llama-3.3-70b',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hello.' },
      ],
    })
    expect(result.isError).toBeFalsy()
    expect(result.structuredContent.costUsdc).toMatch(/^\d+\.\d{6}$/)
  })

  test('bad input is a tool error and charges nothing', async () => {
    const before = await balances(stack, buyer.accountId)
    const both = failure(
      await call('chat', { model: 'llama-3.3-70b', prompt: 'a', messages: [{ role: 'user' }] }),
    )
    expect(both.message).toContain('exactly one of prompt and messages')
    expect(failure(await call('chat', { model: 'llama-3.3-70b' })).code).toBe('invalid_arguments')
    expect(failure(await call('chat', { prompt: 'hi' })).message).toContain(
      'missing required argument: model',
    )
    const unknown = failure(await call('chat', { model: 'no-such-model', prompt: 'hi' }))
    expect(unknown).toMatchObject({ status: 404, code: 'model_not_found' })
    expect(await balances(stack, buyer.accountId)).toEqual(before)
  })

  test('an unfunded account gets the 402 as a tool error, without accepts', async () => {
    const unfunded = await connect((await createAccount(stack)).apiKey)
    const result = await call('chat', { model: 'llama-3.3-70b', prompt: 'hi' }, unfunded)
    expect(failure(result)).toMatchObject({ status: 402, code: 'insufficient_balance' })
    expect(result.structuredContent.accepts).toBeUndefined()
    expect((result.content[0] as { text: string }).text).toStartWith('HTTP 402 insufficient_balance:')
    await unfunded.close()
  })

  test('a 503 from the market comes back with its code and hints', async () => {
    const lowered = await call('set_max_price', { maxPriceCents: 30 })
    expect(lowered.isError).toBeFalsy()
    const result = await call('chat', { model: 'llama-3.3-70b', prompt: 'hi' })
    const error = failure(result)
    expect(error).toMatchObject({ status: 503, code: 'no_eligible_supply' })
    expect((result.structuredContent.error as { cheapestPostedCents: number }).cheapestPostedCents).toBe(40)
  })
})
