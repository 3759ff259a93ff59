// Secrets never leave: a whole buyer and operator session (account, key minted, offer posted with
// an upstream key, chat buffered and streamed, a supplier failure, a revoked key, funding off) with
// every log line, every response body and header and every value in Redis kept, then searched for
// each secret. An API key's plaintext may appear only in the one response that minted it. Then
// funding on, with a chain RPC URL and a facilitator URL that carry a provider key in their path
// and query and both failing: no log line and no response holds either key.
import { afterAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { createLogger } from '../../src/logger.ts'
import { adminFetch, createAccount, keyFetch, logCapture } from '../helpers/accounts.ts'
import { simKey } from '../helpers/buyers.ts'
import { keep, leaksOf, type Seen, storedValues } from '../helpers/secrets.ts'
import { startStack } from '../helpers/stack.ts'
import { challenge, waitFor, xPayment } from '../helpers/x402.ts'

const capture = logCapture()
const masterKey = randomBytes(32).toString('hex')
const catalogKey = `sk-catalog-${randomBytes(16).toString('hex')}`
const stack = await startStack({
  env: { SVC_MASTER_KEY: masterKey, SVC_UPSTREAM_API_KEY: catalogKey },
  logger: createLogger('trace', 'svc-gateway', capture.stream),
})
afterAll(() => stack.stop())

const chatBody = (stream: boolean) => ({
  model: 'llama-3.3-70b',
  stream,
  messages: [{ role: 'user', content: 'hello' }],
})

test('no API key, upstream key, master key or admin token in any log line, response, error or Redis value', async () => {
  const seen: Seen[] = []
  const upstreamKey = `sk-upstream-${randomBytes(16).toString('hex')}`
  const adminToken = stack.config.adminToken

  // Operator: an account (its first key is in this response, and only here), an offer, credit.
  const created = await createAccount(stack)
  const offer = await keep(
    seen,
    'post offer',
    await adminFetch(stack, '/admin/v1/offers', {
      method: 'POST',
      json: { upstreamBaseUrl: stack.sim.url, upstreamApiKey: upstreamKey, askCents: 40, capacityDiem: '50' },
    }),
  )
  expect(offer.status).toBe(201)
  const offerId = ((await offer.json()) as { id: string }).id
  await keep(seen, 'list offers', await adminFetch(stack, '/admin/v1/offers'))
  await keep(seen, 'get offer', await adminFetch(stack, `/admin/v1/offers/${offerId}`))
  await keep(
    seen,
    'credit',
    await adminFetch(stack, `/admin/v1/accounts/${created.accountId}/credit`, {
      method: 'POST',
      json: { amountUsdc: '5.000000' },
    }),
  )
  await keep(seen, 'get account', await adminFetch(stack, `/admin/v1/accounts/${created.accountId}`))
  await keep(
    seen,
    'admin with a wrong token',
    await adminFetch(stack, '/admin/v1/offers', {
      headers: { authorization: `Bearer ${adminToken.slice(0, -1)}x` },
    }),
  )

  // Buyer: a second key minted (its plaintext leaves only in the mint response).
  const minted = await keyFetch(stack, created.apiKey, '/v1/agent/keys', {
    method: 'POST',
    json: { name: 'ci' },
  })
  expect(minted.status).toBe(201)
  const mintSeen: Seen[] = []
  const second = (await (await keep(mintSeen, 'mint', minted)).json()) as { apiKey: string; id: string }
  const apiKeys = [created.apiKey, second.apiKey]

  const buffered = await keep(
    seen,
    'chat buffered',
    await keyFetch(stack, created.apiKey, '/v1/chat/completions', { method: 'POST', json: chatBody(false) }),
  )
  expect(buffered.status).toBe(200)
  const reference = buffered.headers.get('x-svc-support-reference')!
  const streamed = await keep(
    seen,
    'chat streamed',
    await keyFetch(stack, second.apiKey, '/v1/chat/completions', { method: 'POST', json: chatBody(true) }),
  )
  expect(streamed.status).toBe(200)
  // Supplier failures: an error before any byte, and a stream cut mid-way.
  await simKey(stack, upstreamKey, { fault: 'error_5xx', times: 1 })
  const failed = await keep(
    seen,
    'chat failed',
    await keyFetch(stack, created.apiKey, '/v1/chat/completions', { method: 'POST', json: chatBody(false) }),
  )
  expect(failed.status).toBeGreaterThanOrEqual(400)
  await simKey(stack, upstreamKey, { fault: 'truncate', times: 1 })
  await keep(
    seen,
    'stream truncated',
    await keyFetch(stack, created.apiKey, '/v1/chat/completions', { method: 'POST', json: chatBody(true) }),
  )
  await keep(
    seen,
    'bad body',
    await keyFetch(stack, created.apiKey, '/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"model": ',
    }),
  )
  await keep(seen, 'me', await keyFetch(stack, created.apiKey, '/v1/agent/me'))
  await keep(seen, 'keys', await keyFetch(stack, created.apiKey, '/v1/agent/keys'))
  await keep(seen, 'request record', await keyFetch(stack, created.apiKey, `/v1/agent/requests/${reference}`))
  await keep(
    seen,
    'revoke',
    await keyFetch(stack, created.apiKey, `/v1/agent/keys/${second.id}`, { method: 'DELETE' }),
  )
  const refused = await keep(
    seen,
    'revoked key',
    await keyFetch(stack, second.apiKey, '/v1/chat/completions', { method: 'POST', json: chatBody(false) }),
  )
  expect(refused.status).toBe(401)
  await keep(seen, 'near-miss key', await keyFetch(stack, `${created.apiKey.slice(0, -1)}x`, '/v1/agent/me'))
  // Funding is off here: the funding routes answer without any secret too.
  await keep(
    seen,
    'refill',
    await keyFetch(stack, created.apiKey, '/v1/x402/refill', { method: 'POST', json: {} }),
  )
  await keep(seen, 'signup', await keyFetch(stack, null, '/v1/x402/signup', { method: 'POST', json: {} }))

  await keep(seen, 'metrics', await adminFetch(stack, '/metrics'))
  await keep(seen, 'healthz', await fetch(`${stack.url}/healthz`))
  await keep(seen, 'readyz', await fetch(`${stack.url}/readyz`))

  const publicRoutes = ['/v1/models', '/v1/capacity', '/v1/models/stats', '/llms.txt', '/openapi.json']
  const publicSeen: Seen[] = []
  for (const path of publicRoutes) {
    const response = await keep(publicSeen, path, await fetch(`${stack.url}${path}`))
    expect(response.status).toBe(200)
  }
  seen.push(...publicSeen)

  const secrets: Record<string, string> = {
    'first API key': created.apiKey,
    'second API key': second.apiKey,
    'upstream key': upstreamKey,
    'catalog upstream key': catalogKey,
    'master key': masterKey,
    'admin token': adminToken,
  }
  const logs = capture.lines.join('')
  expect(capture.lines.length).toBeGreaterThan(10)
  const leaks = leaksOf(secrets, logs, seen)
  // The scan sees what it should: the mint response holds its key, the log holds each request.
  expect(mintSeen[0]!.text).toContain(second.apiKey)
  expect(logs).toContain(buffered.headers.get('x-svc-request-id')!)
  expect(logs).toContain(streamed.headers.get('x-svc-request-id')!)
  expect(apiKeys.every((key) => key.startsWith('svc_'))).toBe(true)
  expect(leaks).toEqual([])

  // At rest: Redis holds API keys only as digests and upstream keys only sealed.
  const stored = await storedValues(stack.store, stack.keys.base)
  expect(stored).toContain(offerId) // the scan reads what is there
  for (const [name, secret] of Object.entries(secrets)) {
    expect({ name, inRedis: stored.includes(secret) }).toEqual({ name, inRedis: false })
  }

  // No supplier identity on public routes: not its base URL, not its host and port.
  const simHost = new URL(stack.sim.url).host
  for (const { what, text } of publicSeen) {
    expect({ what, leaks: text.includes(simHost) || text.includes(stack.sim.url) }).toEqual({
      what,
      leaks: false,
    })
  }
})

test('a failing chain RPC or facilitator URL never puts its key in a log line or a response', async () => {
  const rpcKey = `rpc-${randomBytes(12).toString('hex')}`
  const rpcQueryKey = `rpcq-${randomBytes(12).toString('hex')}`
  const facilitatorKey = `fac-${randomBytes(12).toString('hex')}`
  // The RPC answers, but only with errors; the facilitator's port has nothing listening.
  const rpc = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: () => new Response('bad gateway', { status: 502 }),
  })
  const rpcHost = `127.0.0.1:${rpc.port}`
  const rpcUrl = `http://${rpcHost}/v2/${rpcKey}?apikey=${rpcQueryKey}`
  // Port 9 (discard): nothing listens there, and no test binds a port outside the ephemeral range,
  // where a free port chosen now could be taken by another test's server before the call.
  const facilitatorHost = '127.0.0.1:9'
  const facilitatorUrl = `http://user:${facilitatorKey}@${facilitatorHost}/x402/${facilitatorKey}`
  const funding = {
    SVC_X402_NETWORK: 'base-sepolia',
    SVC_CHAIN_RPC_URL: rpcUrl,
    SVC_USDC_ADDRESS: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
    SVC_PAY_TO: privateKeyToAccount(generatePrivateKey()).address,
    SVC_X402_WATCH_INTERVAL_MS: '50',
  }
  const capture = logCapture()
  const logger = createLogger('trace', 'svc-gateway', capture.stream)
  const selfSettled = await startStack({
    env: { ...funding, SVC_RELAYER_PRIVATE_KEY: generatePrivateKey() },
    logger,
  })
  const remote = await startStack({ env: { ...funding, SVC_FACILITATOR_URL: facilitatorUrl }, logger })
  const seen: Seen[] = []
  try {
    const payer = privateKeyToAccount(generatePrivateKey())
    for (const [name, stack] of [
      ['self-settled', selfSettled],
      ['facilitator', remote],
    ] as const) {
      const url = `${stack.url}/v1/x402/signup`
      const body = { amountUsdc: '2.000000' }
      const header = await xPayment(payer, await challenge(url, body))
      const paid = await keep(
        seen,
        `${name} paid signup`,
        await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-payment': header },
          body: JSON.stringify(body),
        }),
      )
      expect(paid.status).toBeGreaterThanOrEqual(400)
    }
    // The watcher's chain reads fail on both replicas, and the facilitator call fails: all logged.
    const logged = (text: string) => capture.lines.filter((line) => line.includes(text)).length
    const failures = await waitFor(
      async () => [logged('funding watch tick failed') >= 2, logged('payment verification call failed') >= 1],
      (found) => found.every(Boolean),
      20_000,
    )
    expect(failures).toEqual([true, true])
  } finally {
    await selfSettled.stop()
    await remote.stop()
    rpc.stop(true)
  }
  const logs = capture.lines.join('')
  // The scan sees what it should: the failures are logged, naming each host (never more of the URL).
  expect(logs).toContain(rpcHost)
  expect(logs).toContain(`${facilitatorHost}/`)
  const leaks: string[] = []
  for (const [name, secret] of Object.entries({ rpcKey, rpcQueryKey, facilitatorKey })) {
    if (logs.includes(secret)) leaks.push(`${name} in the log`)
    for (const { what, text } of seen) if (text.includes(secret)) leaks.push(`${name} in ${what}`)
  }
  expect(leaks).toEqual([])
}, 30_000)
