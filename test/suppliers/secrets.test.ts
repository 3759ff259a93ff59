// Secrets never leave on the supplier side: everything a supplier does (sign-in, a second key, an
// offer posted with an upstream key, one refused, buyer traffic clearing on it, its fills, offers
// and summary, a revoked key, near-miss keys, the MCP tools) with every log line, every response
// and every value in Redis kept, then searched. A `sup_` key may appear only in the one response
// that minted it; an upstream key nowhere, and only sealed in Redis.
import { afterAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { createLogger } from '../../src/logger.ts'
import { keyFetch, logCapture } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { keep, leaksOf, type Seen, storedValues } from '../helpers/secrets.ts'
import { startStack } from '../helpers/stack.ts'
import { postSignIn, siweMessage, supplierNonce } from '../helpers/suppliers.ts'

const capture = logCapture()
const stack = await startStack({ logger: createLogger('trace', 'svc-gateway', capture.stream) })
afterAll(() => stack.stop())

test('no supplier key or upstream key in any log line, response or Redis value', async () => {
  const seen: Seen[] = []
  const minted: Seen[] = []
  const account = privateKeyToAccount(generatePrivateKey())
  const message = siweMessage(stack, account, await supplierNonce(stack))
  const signIn = await keep(
    minted,
    'signin',
    await postSignIn(stack, { message, signature: await account.signMessage({ message }) }),
  )
  const { apiKey } = (await signIn.json()) as { apiKey: string }
  const mint = await keep(
    minted,
    'mint',
    await keyFetch(stack, apiKey, '/v1/supplier/keys', { method: 'POST', json: { name: 'second' } }),
  )
  const second = (await mint.json()) as { apiKey: string; id: string }

  const upstreamKey = `venice-${randomBytes(16).toString('hex')}`
  const rejectedKey = `venice-${randomBytes(16).toString('hex')}`
  await fetch(`${stack.sim.url}/sim/keys/${rejectedKey}`, {
    method: 'PUT',
    body: JSON.stringify({ revoked: true }),
  })
  const post = (key: string) =>
    keyFetch(stack, apiKey, '/v1/supplier/offers', {
      method: 'POST',
      json: { upstreamApiKey: key, askCents: 40, capacityDiem: '20' },
    })
  const offer = await keep(seen, 'post offer', await post(upstreamKey))
  expect(offer.status).toBe(201)
  const offerId = ((await offer.json()) as { id: string }).id
  expect((await keep(seen, 'rejected offer', await post(rejectedKey))).status).toBe(400)
  expect((await keep(seen, 'key in use', await post(upstreamKey))).status).toBe(409)

  const buyer = await fundedBuyer(stack, '2')
  const chat = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }] },
  })
  expect(chat.status).toBe(200)
  await chat.arrayBuffer()
  for (const path of [
    '/v1/supplier/me',
    '/v1/supplier/offers',
    `/v1/supplier/offers/${offerId}`,
    '/v1/supplier/fills',
    '/v1/supplier/keys',
  ]) {
    expect((await keep(seen, path, await keyFetch(stack, second.apiKey, path))).status).toBe(200)
  }
  const mcp = await keyFetch(stack, apiKey, '/mcp', {
    method: 'POST',
    headers: { accept: 'application/json, text/event-stream' },
    json: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_offers', arguments: {} } },
  })
  expect((await keep(seen, 'mcp list_offers', mcp)).status).toBe(200)
  await keep(
    seen,
    'revoke',
    await keyFetch(stack, apiKey, `/v1/supplier/keys/${second.id}`, { method: 'DELETE' }),
  )
  await keep(seen, 'revoked key', await keyFetch(stack, second.apiKey, '/v1/supplier/me'))
  await keep(seen, 'near-miss key', await keyFetch(stack, `${apiKey.slice(0, -1)}x`, '/v1/supplier/me'))
  await keep(seen, 'admin list', await keyFetch(stack, stack.config.adminToken, '/admin/v1/suppliers'))

  const secrets: Record<string, string> = {
    'first supplier key': apiKey,
    'second supplier key': second.apiKey,
    'upstream key': upstreamKey,
    'rejected upstream key': rejectedKey,
  }
  const logs = capture.lines.join('')
  expect(capture.lines.length).toBeGreaterThan(10)
  const leaks = leaksOf(secrets, logs, seen)
  expect(leaks).toEqual([])
  // The scan sees what it should: each minting response holds its key, and only its own.
  expect(minted[0]!.text).toContain(apiKey)
  expect(minted[1]!.text).toContain(second.apiKey)
  expect(minted[0]!.text).not.toContain(second.apiKey)

  const stored = await storedValues(stack.store, stack.keys.base)
  expect(stored).toContain(offerId)
  for (const [name, secret] of Object.entries(secrets)) {
    expect({ name, inRedis: stored.includes(secret) }).toEqual({ name, inRedis: false })
  }
})
