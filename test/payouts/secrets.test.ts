// Secrets of the payout side: with a chain RPC URL that carries a provider key in its path and
// query and answers only errors, the sender and the balance watch fail and say so in the log,
// naming the RPC's host only; no log line, no response and no value in Redis holds the RPC's keys
// or the payout wallet's private key.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { createLogger } from '../../src/logger.ts'
import { keyFetch, logCapture } from '../helpers/accounts.ts'
import { seedEarnings } from '../helpers/payouts.ts'
import { keep, leaksOf, type Seen, storedValues } from '../helpers/secrets.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier } from '../helpers/suppliers.ts'
import { waitFor } from '../helpers/x402.ts'

const rpcKey = `rpc-${randomBytes(12).toString('hex')}`
const rpcQueryKey = `rpcq-${randomBytes(12).toString('hex')}`
const payoutKey = generatePrivateKey()
const capture = logCapture()
const rpc = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  fetch: () => new Response('bad gateway', { status: 502 }),
})
const rpcHost = `127.0.0.1:${rpc.port}`
let stack: TestStack

beforeAll(async () => {
  stack = await startStack({
    env: {
      SVC_X402_NETWORK: 'base-sepolia',
      SVC_CHAIN_RPC_URL: `http://${rpcHost}/v2/${rpcKey}?apikey=${rpcQueryKey}`,
      SVC_USDC_ADDRESS: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
      SVC_PAY_TO: privateKeyToAccount(generatePrivateKey()).address,
      SVC_RELAYER_PRIVATE_KEY: generatePrivateKey(),
      SVC_PAYOUT_PRIVATE_KEY: payoutKey,
      SVC_PAYOUT_INTERVAL_MS: '50',
    },
    logger: createLogger('trace', 'svc-gateway', capture.stream),
  })
})
afterAll(async () => {
  await stack.stop()
  rpc.stop(true)
})

test('a failing RPC: payouts wait and log its host only; no key anywhere', async () => {
  const seen: Seen[] = []
  const supplier = await signInSupplier(stack)
  await seedEarnings(stack, supplier.supplierId, 3_000_000)
  const asked = await keep(
    seen,
    'payout asked',
    await keyFetch(stack, supplier.apiKey, '/v1/supplier/payouts', {
      method: 'POST',
      json: { amountUsdc: '2.000000' },
      headers: { 'idempotency-key': 'secret-scan' },
    }),
  )
  expect(asked.status).toBe(201)
  const id = ((await asked.json()) as { id: string }).id
  const logged = (text: string) => capture.lines.filter((line) => line.includes(text)).length
  const failures = await waitFor(
    async () => [logged('payout pass failed') >= 2, logged('payout wallet balances could not be read') >= 1],
    (found) => found.every(Boolean),
    15_000,
  )
  expect(failures).toEqual([true, true])
  // Nothing was sent: the payout waits in sending, its amount pending
  const payout = await keep(
    seen,
    'payout read',
    await keyFetch(stack, supplier.apiKey, `/v1/supplier/payouts/${id}`),
  )
  expect((await payout.json()) as { state: string; txHash: string | null }).toMatchObject({
    state: 'sending',
    txHash: null,
  })
  await keep(seen, 'me', await keyFetch(stack, supplier.apiKey, '/v1/supplier/me'))
  await keep(seen, 'list', await keyFetch(stack, supplier.apiKey, '/v1/supplier/payouts'))

  const logs = capture.lines.join('')
  expect(logs).toContain(rpcHost)
  const stored = await storedValues(stack.store, stack.keys.base)
  const secrets = { rpcKey, rpcQueryKey, payoutKey, payoutKeyBare: payoutKey.slice(2) }
  expect(leaksOf(secrets, logs, [...seen, { what: 'Redis', text: stored }])).toEqual([])
}, 30_000)
