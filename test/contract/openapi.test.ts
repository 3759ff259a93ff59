// The machine-readable contract: /openapi.json validated by a real OpenAPI validator and checked
// against every route the app serves (funding included), and /llms.txt as an agent reads it.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { compileErrors, validate } from '@readme/openapi-parser'
import { Glob } from 'bun'
import { createApp } from '../../src/app.ts'
import { CatalogStore } from '../../src/catalog/store.ts'
import { loadGatewayConfig } from '../../src/config.ts'
import { createFunding } from '../../src/funding/index.ts'
import { openApiPath } from '../../src/http/contract/openapi.ts'
import { OPERATIONS } from '../../src/http/contract/operations.ts'
import { createLogger } from '../../src/logger.ts'
import { keyspace } from '../../src/redis/keys.ts'
import type { Store } from '../../src/redis/store.ts'
import { createStore } from '../../src/redis/store.ts'
import { createAccount, keyFetch } from '../helpers/accounts.ts'
import { startStack, type TestStack, testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { signInSupplier } from '../helpers/suppliers.ts'

type Operation = {
  summary?: string
  description?: string
  tags?: string[]
  security?: unknown[]
  parameters?: { name: string; in: string; schema: Record<string, unknown> }[]
  requestBody?: { content: Record<string, { schema: Record<string, unknown> }> }
  responses: Record<string, { $ref?: string; headers?: Record<string, unknown> }>
}
type Document = {
  openapi: string
  servers: { url: string }[]
  paths: Record<string, Record<string, Operation>>
  components: {
    responses: Record<string, { description: string; headers: Record<string, unknown> }>
    securitySchemes: Record<string, unknown>
  }
}

const ROOT = join(import.meta.dir, '../..')
let stack: TestStack
let store: Store
let app: ReturnType<typeof createApp>
let document: Document

// Every route family, funding included: funding is configured with a chain that is never called
// (building the routes reads nothing from it).
function everyRouteApp() {
  const config = loadGatewayConfig({
    REDIS_URL: testRedisUrl(),
    SVC_REDIS_PREFIX: testPrefix(),
    SVC_ADMIN_TOKEN: `test-admin-${randomBytes(16).toString('hex')}`,
    SVC_MASTER_KEY: randomBytes(32).toString('hex'),
    SVC_UPSTREAM_URL: 'http://127.0.0.1:9',
    SVC_X402_NETWORK: 'base-sepolia',
    SVC_CHAIN_RPC_URL: 'http://127.0.0.1:9',
    SVC_USDC_ADDRESS: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
    SVC_PAY_TO: '0x000000000000000000000000000000000000dEaD',
    SVC_RELAYER_PRIVATE_KEY: `0x${'11'.repeat(32)}`,
  })
  const keys = keyspace(config.redisPrefix)
  const logger = createLogger('silent')
  const funding = createFunding(config.funding!, store, keys, logger)
  return createApp({ config, store, keys, catalog: new CatalogStore(store, keys), logger, funding })
}

beforeAll(async () => {
  stack = await startStack()
  store = createStore(testRedisUrl(), { name: 'svc-test' })
  app = everyRouteApp()
  document = (await (await app.handle(new Request('http://gateway.test/openapi.json'))).json()) as Document
})
afterAll(async () => {
  store.close()
  await stack.stop()
})

const served = () =>
  app.routes.map((route) => ({ method: route.method, path: openApiPath(route.path), route }))

describe('/openapi.json', () => {
  test('is served over HTTP as JSON, naming the address the caller reached', async () => {
    const response = await fetch(`${stack.url}/openapi.json`)
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toStartWith('application/json')
    const served = (await response.json()) as Document
    expect(served.openapi).toMatch(/^3\.1\.\d+$/)
    expect(served.servers).toEqual([{ url: stack.url }])
    expect(Object.keys(served.paths)).toContain('/mcp')
  })

  test('is a valid OpenAPI 3.1 document, and the validator does reject a broken one', async () => {
    const result = await validate(structuredClone(document) as never)
    expect(result.valid ? '' : compileErrors(result)).toBe('')
    expect(result.warnings).toEqual([])
    const broken = structuredClone(document)
    broken.paths['/v1/agent/me']!.get!.responses['401'] = { $ref: '#/components/responses/NoSuchThing' }
    expect((await validate(broken as never)).valid).toBe(false)
  })

  test('has every route the app serves, each with a summary, tags and responses, and no other', () => {
    const routes = served()
    // Public, agent, inference, funding, operator, MCP and the contract itself are all there.
    for (const path of [
      '/v1/models',
      '/v1/agent/me',
      '/v1/chat/completions',
      '/v1/x402/signup',
      '/admin/v1/offers',
    ]) {
      expect(routes.map((r) => r.path)).toContain(path)
    }
    expect(routes.length).toBeGreaterThan(30)
    for (const { method, path } of routes) {
      const documented = OPERATIONS[`${method} ${path}`]
      expect(documented, `${method} ${path}: describe it in src/http/contract/operations.ts`).toBeDefined()
      const operation = document.paths[path]?.[method.toLowerCase()]
      expect(operation, `${method} ${path}`).toBeDefined()
      expect(operation!.summary, `${method} ${path}`).toBe(documented!.summary)
      expect(operation!.tags!.length).toBeGreaterThan(0)
      expect(Object.keys(operation!.responses).length, `${method} ${path}`).toBeGreaterThan(0)
    }
    const operations = Object.entries(document.paths).flatMap(([path, item]) =>
      Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
    )
    expect(operations.sort()).toEqual(routes.map((r) => `${r.method} ${r.path}`).sort())
    // And the table documents nothing the app does not serve.
    expect(Object.keys(OPERATIONS).sort()).toEqual(operations.sort())
  })

  test('request bodies are the schemas the routes validate with', () => {
    let bodies = 0
    for (const { method, path, route } of served()) {
      const schema = (route.hooks as { body?: unknown }).body
      const operation = document.paths[path]![method.toLowerCase()]!
      if (!schema) {
        expect(operation.requestBody, `${method} ${path}`).toBeUndefined()
        continue
      }
      bodies += 1
      expect(operation.requestBody!.content['application/json']!.schema).toEqual(
        JSON.parse(JSON.stringify(schema)),
      )
    }
    expect(bodies).toBeGreaterThanOrEqual(8)
    const maxPrice =
      document.paths['/v1/agent/max-price']!.patch!.requestBody!.content['application/json']!.schema
    expect(maxPrice.properties).toEqual({
      maxPriceCents: { type: 'number', multipleOf: 1, minimum: 30, maximum: 80 },
    })
  })

  test('a key as the agent routes answer it is the ApiKey schema: its budget, limitReset and period included', async () => {
    const schemas = (document.components as unknown as { schemas: Record<string, Record<string, unknown>> })
      .schemas
    const apiKey = schemas.ApiKey as { properties: Record<string, { anyOf?: { const?: unknown }[] }> }
    const list = document.paths['/v1/agent/keys']!.get!.responses['200'] as unknown as {
      content: Record<string, { schema: { properties: { activeApiKeys: { items: { $ref: string } } } } }>
    }
    expect(list.content['application/json']!.schema.properties.activeApiKeys.items.$ref).toBe(
      '#/components/schemas/ApiKey',
    )
    expect(apiKey.properties.limitReset!.anyOf!.map((s) => s.const ?? null)).toEqual([
      'daily',
      'weekly',
      'monthly',
      null,
    ])
    const account = await createAccount(stack)
    const minted = await keyFetch(stack, account.apiKey, '/v1/agent/keys', {
      method: 'POST',
      json: { name: 'budget', limitUsdc: '1', limitReset: 'weekly' },
    })
    expect(minted.status).toBe(201)
    const served = (await (await keyFetch(stack, account.apiKey, '/v1/agent/keys')).json()) as {
      activeApiKeys: Record<string, unknown>[]
    }
    for (const key of served.activeApiKeys) {
      expect(Object.keys(key).sort()).toEqual(Object.keys(apiKey.properties).sort())
    }
    const body = (op: Operation) =>
      op.requestBody!.content['application/json']!.schema as {
        properties: Record<string, unknown>
      }
    expect(body(document.paths['/v1/agent/keys']!.post!).properties).toHaveProperty('limitReset')
    expect(body(document.paths['/v1/agent/keys/{id}']!.patch!).properties).toHaveProperty('limitReset')
  })

  test('inference routes answer the 402, 429 and 503 in the error shape with the X-Svc-* headers', () => {
    const chat = document.paths['/v1/chat/completions']!.post!
    expect(chat.security).toEqual([{ apiKey: [] }])
    for (const status of ['400', '401', '402', '404', '429', '500', '502', '503']) {
      expect(chat.responses[status]!.$ref).toStartWith('#/components/responses/')
    }
    expect(Object.keys(chat.responses['200']!.headers!)).toEqual(
      expect.arrayContaining([
        'X-Svc-Request-Id',
        'X-Svc-Support-Reference',
        'X-Svc-Cost-Usdc',
        'X-Svc-Clearing-Price-Cents',
      ]),
    )
    const unavailable = document.components.responses.ServiceUnavailable!
    expect(Object.keys(unavailable.headers)).toEqual(
      expect.arrayContaining(['X-Svc-Error-Code', 'X-Svc-Cheapest-Posted-Cents', 'X-Svc-Buyer-Max-Cents']),
    )
    // The Messages API takes the key as x-api-key too, and refuses in Anthropic's shape.
    const messages = document.paths['/v1/messages']!.post!
    expect(messages.security).toEqual([{ apiKey: [] }, { anthropicKey: [] }])
    expect(document.components.securitySchemes.anthropicKey).toMatchObject({
      in: 'header',
      name: 'x-api-key',
    })
    for (const status of ['400', '401', '402', '429', '503']) {
      const refusal = messages.responses[status] as unknown as {
        content: Record<string, { schema: unknown }>
      }
      expect(refusal.content['application/json']!.schema).toEqual({
        $ref: '#/components/schemas/MessagesError',
      })
    }
    expect(Object.keys(messages.responses['503']!.headers!)).toContain('X-Svc-Cheapest-Posted-Cents')
    expect(document.paths['/v1/x402/signup']!.post!.responses['402']!.$ref).toBe(
      '#/components/responses/PaymentChallenge',
    )
    expect(document.paths['/v1/capacity']!.get!.parameters).toEqual([
      expect.objectContaining({ name: 'maxPriceCents', in: 'query' }),
    ])
  })
})

describe('/v1/models as Anthropic asks it', () => {
  test("the anthropic-version header, Anthropic's paging and its refusals are documented", async () => {
    const list = document.paths['/v1/models']!.get!
    expect(list.parameters!.map((p) => `${p.in} ${p.name}`)).toEqual(
      expect.arrayContaining([
        'header anthropic-version',
        'query limit',
        'query before_id',
        'query after_id',
      ]),
    )
    expect(list.parameters!.find((p) => p.name === 'limit')!.schema).toMatchObject({
      minimum: 1,
      maximum: 1000,
    })
    for (const field of ['has_more', 'first_id', 'last_id', 'display_name', 'created_at']) {
      expect(list.description).toContain(field)
    }
    const refusal = list.responses['400'] as unknown as { content: Record<string, { schema: unknown }> }
    expect(refusal.content['application/json']!.schema).toEqual({
      $ref: '#/components/schemas/MessagesError',
    })
    const one = document.paths['/v1/models/{id}']!.get!
    expect(one.parameters!.map((p) => `${p.in} ${p.name}`)).toEqual(['header anthropic-version', 'path id'])
    // Each refusal the server answers, in the shape it is answered in, names its code there.
    const answered = await fetch(`${stack.url}/v1/models?limit=0`, {
      headers: { 'anthropic-version': '2023-06-01' },
    })
    expect(answered.status).toBe(400)
    expect(((await answered.json()) as { type: string; error: { code: string } }).error.code).toBe(
      'invalid_limit',
    )
    expect((list.responses['400'] as { description?: string }).description).toContain('invalid_limit')
    for (const version of [{}, { 'anthropic-version': '2023-06-01' }] as Record<string, string>[]) {
      const missing = await fetch(`${stack.url}/v1/models/no-such-model`, { headers: version })
      expect(missing.status).toBe(404)
      const { code } = ((await missing.json()) as { error: { code: string } }).error
      expect((one.responses['404'] as { description?: string }).description).toContain(code)
    }
  })
})

// A refusal a route answers is in that route's responses, its code named by the operation or by
// the response it refers to: a client reading the document can branch on it.
describe('each refusal a route answers is documented on that route', () => {
  async function expectDocumented(method: string, path: string, response: Response) {
    const { code } = ((await response.json()) as { error: { code: string } }).error
    const operation = document.paths[path]![method.toLowerCase()]!
    const documented = operation.responses[String(response.status)] as
      | { $ref?: string; description?: string }
      | undefined
    expect(documented, `${method} ${path}: ${response.status} ${code}`).toBeDefined()
    const shared = documented!.$ref?.replace('#/components/responses/', '')
    const said = [
      operation.summary,
      operation.description,
      documented!.description,
      shared && document.components.responses[shared]!.description,
    ].join(' ')
    expect(said, `${method} ${path}: ${response.status} ${code}`).toContain(code)
  }

  /** This minute's and the next's count at the cap, so a minute turning meanwhile changes nothing. */
  async function fuseBlown(keyOf: (minute: number) => string, cap: number) {
    const minute = Math.floor(Date.now() / 60_000)
    for (const m of [minute, minute + 1]) await stack.store.set(keyOf(m), String(cap), 'PX', 120_000)
  }

  test('the rate limits: nonce_rate_limited on the nonce, key_check_rate_limited on an offer post', async () => {
    const supplier = await signInSupplier(stack)
    await fuseBlown(
      (m) => stack.keys.supplierKeyChecks(m, supplier.supplierId),
      stack.config.supplierKeyChecksPerMinute,
    )
    const post = await keyFetch(stack, supplier.apiKey, '/v1/supplier/offers', {
      method: 'POST',
      json: { upstreamApiKey: `venice-${randomBytes(8).toString('hex')}`, askCents: 40, capacityDiem: '1' },
    })
    expect(post.status).toBe(429)
    await expectDocumented('POST', '/v1/supplier/offers', post)

    await fuseBlown(stack.keys.siweNonceFuse, stack.config.siweNoncesPerMinute)
    const nonce = await fetch(`${stack.url}/v1/supplier/nonce`)
    expect(nonce.status).toBe(429)
    await expectDocumented('GET', '/v1/supplier/nonce', nonce)
  })

  test("key_limit_binding on the account's settings: the max price and the webhook endpoints", async () => {
    const account = await createAccount(stack)
    const minted = await keyFetch(stack, account.apiKey, '/v1/agent/keys', {
      method: 'POST',
      json: { name: 'limited', limitUsdc: '1' },
    })
    expect(minted.status).toBe(201)
    const { apiKey } = (await minted.json()) as { apiKey: string }
    const maxPrice = await keyFetch(stack, apiKey, '/v1/agent/max-price', {
      method: 'PATCH',
      json: { maxPriceCents: 60 },
    })
    expect(maxPrice.status).toBe(403)
    await expectDocumented('PATCH', '/v1/agent/max-price', maxPrice)
    const webhook = await keyFetch(stack, apiKey, '/v1/agent/webhooks', {
      method: 'POST',
      json: { url: 'https://hooks.example.com/svc', events: ['funding.confirmed'] },
    })
    expect(webhook.status).toBe(403)
    await expectDocumented('POST', '/v1/agent/webhooks', webhook)
  })
})

describe('/llms.txt', () => {
  // The funded app (every route, x402 included) as an agent reads it.
  const fundedGuide = async () => (await app.handle(new Request('http://gateway.test/llms.txt'))).text()

  test('is plain text for agents: base address, the steps, and what each error status means', async () => {
    const response = await fetch(`${stack.url}/llms.txt`)
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toBe('text/plain; charset=utf-8')
    const served = await response.text()
    expect(served).toContain(`Base address: ${stack.url}`)
    const text = await fundedGuide()
    expect(text).toContain('http://gateway.test/v1/chat/completions')
    expect(text).toContain('http://gateway.test/v1/messages')
    expect(text).toContain('http://gateway.test/mcp')
    for (const needle of [
      '/v1/x402/signup',
      '/v1/x402/refill',
      '/v1/agent/max-price',
      'X-Svc-Cost-Usdc',
      'svc.cost',
    ]) {
      expect(text).toContain(needle)
    }
    for (const status of ['402', '409', '429', '503']) expect(text).toContain(`- ${status}`)
    for (const code of [
      'no_eligible_supply',
      'pool_empty',
      'insufficient_routable_at_price',
      'key_wait_timeout',
    ]) {
      expect(text).toContain(`503 ${code}`)
    }
    expect(text).toContain('accepts')
  })

  test('names every 403 and 429 code the gateway answers, as the OpenAPI document does', async () => {
    // The codes a client must branch on (a limit, a binding, a wait), read from the source itself.
    const codes = new Set<string>()
    for (const file of new Glob('src/**/*.ts').scanSync(ROOT)) {
      const source = readFileSync(join(ROOT, file), 'utf8')
      for (const m of source.matchAll(/new ApiError\(\s*(?:403|429)\s*,\s*'([a-z0-9_]+)'/g)) codes.add(m[1]!)
    }
    expect([...codes]).toEqual(
      expect.arrayContaining(['key_limit_binding', 'count_concurrency_limit', 'key_check_rate_limited']),
    )
    const guide = await fundedGuide()
    const contract = JSON.stringify(document)
    for (const code of codes) {
      expect(guide, code).toContain(code)
      expect(contract, code).toContain(code)
    }
    // key_limit_binding reaches the account's settings too.
    const binding = guide.slice(guide.indexOf('403 key_limit_binding')).split('\n- ')[0]!
    expect(binding).toContain('max price')
    expect(binding).toContain('webhook')
  })

  test('without the funding network it sends agents to the operator, never to an absent x402 route', async () => {
    const guide = await (await fetch(`${stack.url}/llms.txt`)).text()
    expect((await fetch(`${stack.url}/v1/x402/signup`, { method: 'POST' })).status).toBe(404)
    expect(guide).not.toContain('/v1/x402/')
    expect(guide).toContain('Funding by payment (x402) is off on this gateway')
    expect(guide).toContain('/admin/v1/accounts')
    expect(guide).toContain(`${stack.url}/v1/chat/completions`)
    // Its refusals are the ones it can answer: no payment challenge, no funding conflict.
    expect(guide).not.toContain('"accepts"')
    expect(guide).not.toContain('409 on funding')
    expect(guide).toContain('ask the operator for a credit')
    // The funded gateway's guide keeps the x402 steps and their refusals.
    const funded = await fundedGuide()
    expect(funded).toContain('http://gateway.test/v1/x402/signup')
    expect(funded).toContain('402 with "accepts"')
    expect(funded).toContain('409 on funding')
  })
})
