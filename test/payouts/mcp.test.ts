// The payout tools with the official MCP SDK client over real HTTP, on a real local chain:
// request_payout with one idempotencyKey twice makes one payout and one transfer, list_payouts
// answers as its route, and refusals come back as tool errors with the route's code.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import type { Address } from 'viem'
import { keyFetch } from '../helpers/accounts.ts'
import { startChain, type TestChain } from '../helpers/chain.ts'
import { payoutEnv, payoutWalletOn, seedEarnings, transfersFrom, waitForPayout } from '../helpers/payouts.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier } from '../helpers/suppliers.ts'

let chain: TestChain
let stack: TestStack
let payoutAddress: Address
let client: Client

type Result = CallToolResult & { structuredContent: Record<string, unknown> }

beforeAll(async () => {
  chain = await startChain()
  const wallet = await payoutWalletOn(chain)
  payoutAddress = wallet.address
  stack = await startStack({ env: payoutEnv(chain, wallet.key) })
})
afterAll(async () => {
  await client?.close()
  await stack.stop()
  await chain.stop()
})

test('request_payout twice with one key: one payout, one transfer; list_payouts is its route', async () => {
  const supplier = await signInSupplier(stack)
  await seedEarnings(stack, supplier.supplierId, 4_000_000)
  client = new Client({ name: 'svc-test-payouts', version: '1.0.0' })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${supplier.apiKey}` } },
    }),
  )
  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as Result
  const args = { amountUsdc: '2.500000', idempotencyKey: 'mcp-payout-1' }
  const first = await call('request_payout', args)
  const again = await call('request_payout', args)
  expect(first.isError).toBeUndefined()
  expect(first.structuredContent).toMatchObject({ amountUsdc: '2.500000', wallet: supplier.wallet })
  expect(again.structuredContent.id).toBe(first.structuredContent.id)
  const over = await call('request_payout', { amountUsdc: '2.000000', idempotencyKey: 'mcp-payout-2' })
  expect(over.isError).toBe(true)
  expect(over.structuredContent).toMatchObject({ status: 409, error: { code: 'payout_exceeds_payable' } })

  const id = first.structuredContent.id as string
  const done = await waitForPayout(stack, chain, supplier.apiKey, id, ['confirmed', 'failed'])
  expect(done.state).toBe('confirmed')
  const listed = await call('list_payouts', { limit: 10 })
  const route = await (await keyFetch(stack, supplier.apiKey, '/v1/supplier/payouts?limit=10')).json()
  expect(listed.structuredContent).toEqual(route as Record<string, unknown>)
  expect((listed.structuredContent.data as { id: string }[]).map((p) => p.id)).toEqual([id])
  expect((await transfersFrom(chain, payoutAddress)).map((t) => [t.to, t.value])).toEqual([
    [supplier.wallet as Address, 2_500_000n],
  ])
})
