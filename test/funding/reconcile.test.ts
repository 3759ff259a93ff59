// A settlement whose receipt does not come in time: the buyer gets 409 `reconciling: true` with
// the transaction (never `accepts`), and the reconciler credits it from the chain once mined.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import type { TestStack } from '../helpers/stack.ts'
import { challenge, post, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let chainStack: ChainStack
beforeAll(async () => {
  chainStack = await startChainStack({
    confirmations: 1,
    env: { SVC_X402_RECEIPT_TIMEOUT_MS: '300', SVC_X402_WATCH_INTERVAL_MS: '50' },
  })
  ;({ chain, stack } = chainStack)
  // Compiling the token and starting anvil can pass bun's 5 s hook default on a busy machine.
}, 30_000)
afterAll(() => chainStack.stop())

test('receipt timeout -> 409 reconciling with the transaction -> credited later, once', async () => {
  const payer = await chain.newPayer(10_000_000n)
  const url = `${stack.url}/v1/x402/signup`
  const requirements = await challenge(url, { amountUsdc: '7.000000' })
  const header = await xPayment(payer, requirements)
  const payToBefore = await chain.balanceOf(chain.payTo)

  await chain.testClient.setAutomine(false)
  const response = await post(url, { amountUsdc: '7.000000' }, { 'x-payment': header })
  expect(response.status).toBe(409)
  expect(response.body.accepts).toBeUndefined()
  const error = response.body.error as { code: string; reconciling: boolean; transaction: string }
  expect(error).toMatchObject({ code: 'payment_reconciling', reconciling: true })
  expect(error.transaction).toMatch(/^0x[0-9a-f]{64}$/)

  // Replayed while in flight: still a 409, nothing sent twice.
  const early = await post(url, { amountUsdc: '7.000000' }, { 'x-payment': header })
  expect(early.status).toBe(409)
  expect(early.body.error).toMatchObject({ reconciling: true, transaction: error.transaction })

  await chain.testClient.mine({ blocks: 1 })
  await chain.testClient.setAutomine(true)
  const wallet = payer.address.toLowerCase()
  let balances: Record<string, string> = {}
  for (;;) {
    const accountId = await stack.store.hget(stack.keys.wallets, wallet)
    if (accountId) balances = await stack.store.hgetall(stack.keys.account(accountId))
    if (balances.funded === '7000000') break
    await Bun.sleep(25)
  }
  expect(balances.funded).toBe('7000000')
  expect(Number(balances.pending) + Number(balances.confirmed)).toBe(7_000_000)
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 7_000_000n)

  const replay = await post(url, { amountUsdc: '7.000000' }, { 'x-payment': header })
  expect(replay.status).toBe(409)
  expect(replay.body.error).toMatchObject({
    code: 'payment_already_credited',
    credited: true,
    transaction: error.transaction,
  })
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 7_000_000n)
})
