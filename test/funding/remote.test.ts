// Settlement through a remote facilitator (SVC_FACILITATOR_URL instead of a relayer key): x402's
// reference facilitator over HTTP on the same local chain. The gateway still checks the terms,
// refuses replays, claims the authorization and credits once; the facilitator verifies and sends.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { startFacilitator, type TestFacilitator } from '../helpers/facilitator.ts'
import type { TestStack } from '../helpers/stack.ts'
import { challenge, pay, post, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let facilitator: TestFacilitator
let stack: TestStack
let chainStack: ChainStack<undefined, TestFacilitator>
beforeAll(async () => {
  chainStack = await startChainStack({ confirmations: 1, facilitator: startFacilitator })
  ;({ chain, stack, facilitator } = chainStack)
}, 30_000)
afterAll(() => chainStack.stop())

const signupUrl = () => `${stack.url}/v1/x402/signup`

describe('a remote facilitator', () => {
  test('settles a signup and a refill; each is credited once; a replay never reaches it', async () => {
    expect(stack.config.funding?.relayerPrivateKey).toBeUndefined()
    const payer = await chain.newPayer(40_000_000n)
    const payToBefore = await chain.balanceOf(chain.payTo)
    const { response: signup } = await pay(signupUrl(), { amountUsdc: '4.000000', name: 'remote' }, payer)
    expect(signup.status).toBe(201)
    // Read before toMatchObject: bun 1.4.5's toMatchObject writes its matchers into the object it passes.
    const transaction = signup.body.transaction as `0x${string}`
    expect(transaction).toMatch(/^0x[0-9a-f]{64}$/)
    expect(signup.body.name).toBe('remote')
    expect(facilitator.calls).toEqual({ verify: 1, settle: 1 })
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: transaction })
    expect(receipt.status).toBe('success')

    const bearer = { authorization: `Bearer ${signup.body.apiKey}` }
    const { header, response: refill } = await pay(
      `${stack.url}/v1/x402/refill`,
      { amountUsdc: '6.000000' },
      payer,
      bearer,
    )
    expect(refill.status).toBe(200)
    expect(refill.body).toMatchObject({ credited: true, balances: { pendingUsdc: expect.any(String) } })
    expect(facilitator.calls).toEqual({ verify: 2, settle: 2 })

    const replay = await post(
      `${stack.url}/v1/x402/refill`,
      { amountUsdc: '6.000000' },
      { ...bearer, 'x-payment': header },
    )
    expect(replay.status).toBe(409)
    expect(replay.body.error).toMatchObject({ code: 'payment_already_credited', credited: true })
    expect(facilitator.calls).toEqual({ verify: 2, settle: 2 })

    expect(await chain.balanceOf(payer.address)).toBe(30_000_000n)
    expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 10_000_000n)
    const account = await stack.store.hgetall(stack.keys.account(signup.body.accountId as string))
    expect(account.funded).toBe('10000000')
  })

  test('a payment the facilitator finds invalid (short balance) is a fresh 402; it settles nothing', async () => {
    const payer = await chain.newPayer(1_000_000n)
    const requirements = await challenge(signupUrl(), { amountUsdc: '2.000000' })
    const header = await xPayment(payer, requirements)
    const settlesBefore = facilitator.calls.settle
    const response = await post(signupUrl(), { amountUsdc: '2.000000' }, { 'x-payment': header })
    expect(response.status).toBe(402)
    expect(response.body.accepts).toHaveLength(1)
    expect(String(response.body.error)).toContain('payment verification failed')
    expect(facilitator.calls.settle).toBe(settlesBefore)
    expect(await chain.balanceOf(payer.address)).toBe(1_000_000n)
    expect(await stack.store.hget(stack.keys.wallets, payer.address.toLowerCase())).toBeNull()
  })
})
