// Every operation of /openapi.json (MCP aside: it has its own tests), called with the right
// credential and a battery of malformed inputs derived from its own schemas. Input the schema
// refuses gets a 4xx in the route's error shape and changes nothing in Redis; input it takes may be
// served, but nothing is ever a 5xx, and a refusal never leaves a change behind.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { keyFetch, mintKey, randomWallet, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer, type SimOffer, simOffer } from '../helpers/buyers.ts'
import {
  bodyCases,
  contentTypeCases,
  credentialOf,
  HOSTILE_IDS,
  HOSTILE_QUERY_VALUES,
  type HostileCase,
  type Operation,
  operationsOf,
  queryValueInvalid,
  sample,
} from '../helpers/hostile-cases.ts'
import { rawRequest } from '../helpers/raw-http.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let buyer: TestAccount
let supplier: TestSupplier
let operations: Operation[]
let ids: Record<string, string>

// Funding and payouts are on, with a chain nobody answers: a payment never gets that far here.
const FUNDING = {
  SVC_X402_NETWORK: 'base-sepolia',
  SVC_CHAIN_RPC_URL: 'http://127.0.0.1:9',
  SVC_USDC_ADDRESS: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
  SVC_PAY_TO: '0x000000000000000000000000000000000000dEaD',
  SVC_RELAYER_PRIVATE_KEY: `0x${'11'.repeat(32)}`,
  SVC_PAYOUT_PRIVATE_KEY: `0x${'22'.repeat(32)}`,
}
const HOOK_URL = 'http://93.184.216.34/hook'

async function created(response: Response, what: string): Promise<string> {
  if (response.status !== 201 && response.status !== 200) throw new Error(`${what}: ${response.status}`)
  return ((await response.json()) as { id: string }).id
}

beforeAll(async () => {
  stack = await startStack({ env: FUNDING })
  const offer: SimOffer = await simOffer(stack, 40)
  buyer = await fundedBuyer(stack)
  supplier = await signInSupplier(stack)
  const asSupplier = (path: string, json: unknown) =>
    keyFetch(stack, supplier.apiKey, path, { method: 'POST', json })
  const asBuyer = (path: string, json: unknown) =>
    keyFetch(stack, buyer.apiKey, path, { method: 'POST', json })
  ids = {
    adminOffer: offer.id,
    key: (await mintKey(stack, buyer.apiKey, { name: 'spare' })).id,
    buyerHook: await created(
      await asBuyer('/v1/agent/webhooks', { url: HOOK_URL, events: ['key.budget.80'] }),
      'hook',
    ),
    supplierOffer: await created(
      await asSupplier('/v1/supplier/offers', {
        upstreamApiKey: `venice-${randomUUID()}`,
        askCents: 50,
        capacityDiem: '5',
      }),
      'offer',
    ),
    supplierKey: await created(await asSupplier('/v1/supplier/keys', { name: 'spare' }), 'supplier key'),
    supplierHook: await created(
      await asSupplier('/v1/supplier/webhooks', { url: HOOK_URL, events: ['payout.confirmed'] }),
      'supplier hook',
    ),
  }
  const document = (await (await fetch(`${stack.url}/openapi.json`)).json()) as Parameters<
    typeof operationsOf
  >[0]
  operations = operationsOf(document).filter((op) => !op.tags.includes('mcp'))
})
afterAll(() => stack.stop())

/** A well-formed value for each path parameter: the fixture it names, so only the input under test is wrong. */
function pathValue(op: Operation, name: string): string {
  const { path } = op
  if (name === 'accountId') return buyer.accountId
  if (name === 'eventId') return 'evt_none'
  if (name === 'transaction') return `0x${'ab'.repeat(32)}`
  if (name === 'file') return 'none.js'
  if (path.startsWith('/admin/v1/offers/')) return ids.adminOffer!
  if (path.startsWith('/admin/v1/suppliers/')) return supplier.supplierId
  if (path.startsWith('/v1/agent/keys/')) return ids.key!
  if (path.startsWith('/v1/agent/webhooks/')) return ids.buyerHook!
  if (path.startsWith('/v1/supplier/offers/')) return ids.supplierOffer!
  if (path.startsWith('/v1/supplier/keys/')) return ids.supplierKey!
  if (path.startsWith('/v1/supplier/webhooks/')) return ids.supplierHook!
  if (path.startsWith('/v1/models/')) return 'llama-3.3-70b'
  return 'none'
}

/** A body each route would take (the schema's plainest sample where nothing better is known). */
function validBody(op: Operation): unknown {
  const chat = { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }
  const known: Record<string, unknown> = {
    'POST /v1/chat/completions': chat,
    'POST /v1/messages': chat,
    'POST /v1/messages/count_tokens': { model: chat.model, messages: chat.messages },
    'POST /v1/responses': { model: chat.model, input: 'hi', max_output_tokens: 4 },
    'POST /v1/images/generations': { model: 'flux-dev', prompt: 'a cat' },
    'POST /v1/video/quote': { model: 'wan-2.1-video', prompt: 'a cat', duration: '5s' },
    'POST /v1/video/queue': { model: 'wan-2.1-video', prompt: 'a cat', duration: '5s' },
    'POST /v1/agent/webhooks': { url: HOOK_URL, events: ['funding.confirmed'] },
    'POST /v1/supplier/webhooks': { url: HOOK_URL, events: ['payout.confirmed'] },
    'POST /admin/v1/offers': {
      upstreamBaseUrl: stack.sim.url,
      upstreamApiKey: 'sim-fuzz',
      askCents: 50,
      capacityDiem: '5',
    },
    'POST /v1/supplier/offers': { upstreamApiKey: 'venice-fuzz', askCents: 50, capacityDiem: '5' },
    'POST /admin/v1/accounts': { wallet: randomWallet() },
    'POST /admin/v1/accounts/{accountId}/credit': { amountUsdc: '0.010000', note: 'fuzz' },
    'POST /v1/supplier/payouts': { amountUsdc: '1.000000' },
    'PATCH /admin/v1/offers/{id}': { askCents: 40 },
    'PATCH /v1/supplier/offers/{id}': { askCents: 50 },
    'PATCH /v1/agent/keys/{id}': { name: 'spare' },
    'PATCH /v1/agent/max-price': { maxPriceCents: 80 },
    'PATCH /admin/v1/suppliers/{id}': { status: 'active' },
    'POST /v1/x402/topup': { amountUsdc: '1.00' },
    'POST /v1/x402/signup': { amountUsdc: '1.00' },
    'POST /v1/x402/refill': { amountUsdc: '1.00' },
  }
  return `${op.method} ${op.path}` in known ? known[`${op.method} ${op.path}`] : sample(op.body!)
}

const credential = (op: Operation) =>
  credentialOf(op, { admin: stack.config.adminToken, buyer: buyer.apiKey, supplier: supplier.apiKey })

function target(op: Operation, override: Record<string, string> = {}, query = ''): string {
  const path = op.path.replace(
    /\{([^}]+)\}/g,
    (_, name: string) => override[name] ?? encodeURIComponent(pathValue(op, name)),
  )
  return query ? `${path}?${query}` : path
}

/** Every case for one operation; `settles` marks those that must change nothing in Redis. */
function casesFor(op: Operation): (HostileCase & { method: string; settles: boolean })[] {
  const reads = op.method === 'GET' || op.method === 'HEAD'
  const json = { 'content-type': 'application/json' }
  const idempotency = op.parameters.some((p) => p.in === 'header' && p.name === 'Idempotency-Key')
  const base = () => ({ ...credential(op), ...(idempotency ? { 'idempotency-key': randomUUID() } : {}) })
  // A route that reads its query only in Anthropic's dialect (/v1/models) is asked its query in it.
  const dialect = op.parameters.some((p) => p.in === 'header' && p.name === 'anthropic-version')
  const queried = () => ({ ...base(), ...(dialect ? { 'anthropic-version': '2023-06-01' } : {}) })
  const cases: HostileCase[] = []
  const validText = op.body ? new TextEncoder().encode(JSON.stringify(validBody(op))) : undefined
  if (op.body) {
    const body = validBody(op)
    for (const c of bodyCases(op.body, body))
      cases.push({ ...c, target: target(op), headers: { ...base(), ...json } })
    for (const c of contentTypeCases(op.body, body)) {
      const headers: Record<string, string> = {
        ...base(),
        ...(c.contentType ? { 'content-type': c.contentType } : {}),
      }
      cases.push({ label: c.label, body: c.body, invalid: c.invalid, target: target(op), headers })
    }
  }
  for (const param of op.parameters) {
    if (param.in === 'path') {
      for (const id of HOSTILE_IDS) {
        cases.push({
          label: `${param.name} = ${id}`,
          target: target(op, { [param.name]: id }),
          headers: { ...base(), ...(validText ? json : {}) },
          body: validText,
          invalid: true,
        })
      }
    }
    if (param.in === 'header' && param.name === 'Idempotency-Key') {
      const headers = { ...credential(op), ...(validText ? json : {}) }
      const variants: [string, Record<string, string>, boolean][] = [
        ['no Idempotency-Key', headers, param.required === true],
        ['an empty Idempotency-Key', { ...headers, 'idempotency-key': '' }, true],
        ['a 256-character Idempotency-Key', { ...headers, 'idempotency-key': 'k'.repeat(256) }, true],
      ]
      for (const [label, h, invalid] of variants)
        cases.push({ label, target: target(op), headers: h, body: validText, invalid })
    }
    if (param.in === 'query' && reads) {
      for (const value of HOSTILE_QUERY_VALUES) {
        let decoded = value
        try {
          decoded = decodeURIComponent(value)
        } catch {}
        const invalid = queryValueInvalid(param.schema, decoded)
        cases.push({
          label: `?${param.name}=${value}`,
          target: target(op, {}, `${param.name}=${value}`),
          headers: queried(),
          invalid,
        })
      }
      // A one-value parameter given twice is refused, whatever the values; a list may repeat.
      const repeated = `${param.name}=1&${param.name}=2`
      const list = (param.schema as { type?: string }).type === 'array'
      cases.push({
        label: `?${repeated}`,
        target: target(op, {}, repeated),
        headers: queried(),
        invalid: !list,
      })
      for (const query of [`${param.name}[]=1`, `${param.name}[a]=1`]) {
        cases.push({ label: `?${query}`, target: target(op, {}, query), headers: queried(), invalid: false })
      }
    }
  }
  if (reads) {
    for (const query of ['&&==&', '%zz=%zz', `a=${'b'.repeat(8192)}`, 'a=1&a=2&a=3'])
      cases.push({ label: `?${query}`, target: target(op, {}, query), headers: queried(), invalid: false })
  }
  return cases.map((c) => ({ ...c, method: op.method, settles: c.invalid || reads }))
}

const short = (text: string) =>
  text.replace(/(.)\1{15,}/gs, (run, c: string) => `${c}×${run.length}`).slice(0, 300)

/** What is wrong with a refusal's body, if anything: the route's error shape, no internals. */
function shapeProblem(anthropic: boolean, status: number, text: string): string | null {
  if (/at .*\.ts:\d+|node_modules/.test(text)) return 'internals in the body'
  let body: {
    type?: unknown
    error?: { type?: unknown; message?: unknown; code?: unknown }
    accepts?: unknown
    request_id?: unknown
  }
  try {
    body = JSON.parse(text)
  } catch {
    return 'not JSON'
  }
  if (status === 402 && Array.isArray(body.accepts)) return null // a payment challenge
  const error = body.error
  if (typeof error?.message !== 'string' || typeof error.type !== 'string') return 'no error.message/type'
  if (anthropic)
    return body.type === 'error' && typeof body.request_id === 'string' ? null : 'not Anthropic-shaped'
  return typeof error.code === 'string' ? null : 'no error.code'
}

const state = async () =>
  Object.fromEntries(
    // The capacity snapshot and the public stats are caches, written by whichever request reads
    // them; the payout sender's lease is renewed by its own loop.
    Object.entries(await snapshotKeys(stack.store, stack.keys.prefix)).filter(
      ([k]) => !k.includes(':capacity:') && !k.includes(':stats:snapshot:') && !k.includes(':payout:sender:'),
    ),
  )
const changed = (a: Record<string, string>, b: Record<string, string>) =>
  [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((k) => a[k] !== b[k]).sort()

async function pool<T, R>(items: T[], width: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const at = next++
      results[at] = await work(items[at]!)
    }
  }
  await Promise.all(Array.from({ length: width }, worker))
  return results
}

const findings: string[] = []
type Case = ReturnType<typeof casesFor>[number]
const describeCase = (c: Case) => `${c.method} ${short(c.target)} [${c.label}]`

async function send(c: Case) {
  const response = await rawRequest(stack.url, c.method, c.target, c.headers, c.body)
  const path = c.target.split('?')[0]!
  const problem =
    response.status >= 500 || response.status < 200
      ? `${response.status}`
      : response.status < 400
        ? c.invalid
          ? `${response.status} for input the schema refuses`
          : null
        : shapeProblem(
            path.startsWith('/v1/messages') || 'anthropic-version' in c.headers,
            response.status,
            response.text,
          )
  if (problem) findings.push(`${describeCase(c)}: ${problem}: ${short(response.text)}`)
  return response
}

/** Two snapshots alike in a row: whatever a served request set going has finished. */
async function settled() {
  let last = await state()
  await until(async () => {
    const now = await state()
    const same = changed(last, now).length === 0
    last = now
    return same
  }, 20)
  return last
}

test('every operation: malformed input is a shaped 4xx that changes nothing, and nothing is a 5xx', async () => {
  const started = performance.now()
  const served: Case[] = []
  let sent = 0
  for (const op of operations) {
    const cases = casesFor(op)
    const quiet = cases.filter((c) => c.settles)
    served.push(...cases.filter((c) => !c.settles))
    const before = await state()
    await pool(quiet, 4, send)
    sent += quiet.length
    const moved = changed(before, await state())
    // GET /v1/supplier/nonce mints a nonce by design.
    if (moved.length === 0 || op.path === '/v1/supplier/nonce') continue
    // One at a time, to name the request that changed something.
    let named = false
    for (const c of quiet) {
      const at = await state()
      await rawRequest(stack.url, c.method, c.target, c.headers, c.body)
      const keys = changed(at, await state())
      if (keys.length === 0) continue
      named = true
      findings.push(`${describeCase(c)}: changed ${keys.join(', ')}`)
    }
    if (!named) findings.push(`${op.method} ${op.path}: Redis changed under refusals: ${moved.join(', ')}`)
  }
  // Input the schema takes, one at a time: served or refused, and a refusal leaves nothing behind.
  let before = await settled()
  for (const c of served) {
    const response = await send(c)
    sent += 1
    if (response.status >= 400) {
      const keys = changed(before, await state())
      if (keys.length > 0)
        findings.push(`${describeCase(c)}: ${response.status}, and changed ${keys.join(', ')}`)
      before = await state()
    } else {
      before = await settled()
    }
  }
  console.log(
    `${sent} requests over ${operations.length} operations in ${Math.round(performance.now() - started)} ms`,
  )
  expect(findings).toEqual([])
})
