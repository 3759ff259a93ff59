// Real x402 clients, unchanged, paying the gateway on the local chain: `x402-fetch` (x402 v1, the
// X-PAYMENT header) and `@x402/fetch` (v2, PAYMENT-SIGNATURE), each a signup and then a refill.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { toClientEvmSigner } from '@x402/evm'
import { registerExactEvmScheme } from '@x402/evm/exact/client'
import { decodePaymentResponseHeader, wrapFetchWithPayment as wrapV2, x402Client } from '@x402/fetch'
import { createWalletClient, http, type PrivateKeyAccount } from 'viem'
import { baseSepolia } from 'viem/chains'
import { decodeXPaymentResponse, wrapFetchWithPayment as wrapV1 } from 'x402-fetch'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import type { TestStack } from '../helpers/stack.ts'

let chain: TestChain
let stack: TestStack
let chainStack: ChainStack
beforeAll(async () => {
  chainStack = await startChainStack({ confirmations: 1 })
  ;({ chain, stack } = chainStack)
}, 30_000)
afterAll(() => chainStack.stop())

// x402-fetch refuses anything above 0.1 USDC unless told otherwise; signups here are dollars.
const CAP = 1000n * 1_000_000n

function json(body: unknown, headers: Record<string, string> = {}): RequestInit {
  return {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  }
}

/** x402-fetch for `payer`; without `maxValue`, its own default cap. */
function v1Fetch(payer: PrivateKeyAccount, maxValue?: bigint) {
  const wallet = createWalletClient({
    account: payer,
    chain: { ...baseSepolia, rpcUrls: { default: { http: [chain.rpcUrl] } } },
    transport: http(chain.rpcUrl),
  })
  // biome-ignore lint/suspicious/noExplicitAny: x402's Signer names viem's wallet client loosely
  return wrapV1(fetch, wallet as any, maxValue)
}

function v2Fetch(payer: PrivateKeyAccount) {
  // @x402/fetch pays only assets it knows (real USDC) unless told; the test token is allowed
  // by address, with a cap like the one a careful agent would set.
  const client = new x402Client().setSpendControls({
    allowedAssets: [{ network: 'eip155:84532', asset: chain.usdc, maxAmountPerPayment: String(CAP) }],
  })
  registerExactEvmScheme(client, { signer: toClientEvmSigner(payer) })
  return wrapV2(fetch, client)
}

async function pendingOf(apiKey: string): Promise<string> {
  const response = await fetch(`${stack.url}/v1/agent/me`, { headers: { authorization: `Bearer ${apiKey}` } })
  const me = (await response.json()) as { balances: { pendingUsdc: string; confirmedUsdc: string } }
  return (Number(me.balances.pendingUsdc) + Number(me.balances.confirmedUsdc)).toFixed(6)
}

describe('x402-fetch (v1)', () => {
  test('its default 0.1 USDC cap refuses a signup before signing; nothing moves', async () => {
    const payer = await chain.newPayer(10_000_000n)
    const pay = v1Fetch(payer)
    await expect(pay(`${stack.url}/v1/x402/signup`, json({ amountUsdc: '5.000000' }))).rejects.toThrow(
      'Payment amount exceeds maximum allowed',
    )
    expect(await chain.balanceOf(payer.address)).toBe(10_000_000n)
  })

  test('pays a signup and a refill unchanged, answered with X-PAYMENT-RESPONSE', async () => {
    const payer = await chain.newPayer(50_000_000n)
    const payToBefore = await chain.balanceOf(chain.payTo)
    const pay = v1Fetch(payer, CAP)

    const signup = await pay(`${stack.url}/v1/x402/signup`, json({ amountUsdc: '5.000000', name: 'agent' }))
    expect(signup.status).toBe(201)
    const account = (await signup.json()) as { apiKey: string; name: string; transaction: string }
    expect(account.name).toBe('agent')
    const settled = decodeXPaymentResponse(signup.headers.get('x-payment-response') ?? '')
    expect(settled).toMatchObject({ success: true, transaction: account.transaction, payer: payer.address })

    const refill = await pay(
      `${stack.url}/v1/x402/refill`,
      json({ amountUsdc: '12.500000' }, { authorization: `Bearer ${account.apiKey}` }),
    )
    expect(refill.status).toBe(200)
    expect(await refill.json()).toMatchObject({ amountUsdc: '12.500000', credited: true })
    expect(refill.headers.get('x-payment-response')).toBeTruthy()

    expect(await chain.balanceOf(payer.address)).toBe(32_500_000n)
    expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 17_500_000n)
    expect(await pendingOf(account.apiKey)).toBe('17.500000')
  })
})

describe('@x402/fetch (v2)', () => {
  test('pays a signup and a refill unchanged, answered with PAYMENT-RESPONSE', async () => {
    const payer = await chain.newPayer(50_000_000n)
    const payToBefore = await chain.balanceOf(chain.payTo)
    const pay = v2Fetch(payer)

    const signup = await pay(`${stack.url}/v1/x402/signup`, json({ amountUsdc: '3.000000' }))
    expect(signup.status).toBe(201)
    const account = (await signup.json()) as { apiKey: string; transaction: string }
    // v2 was spoken: the answer is PAYMENT-RESPONSE, not the v1 header.
    expect(signup.headers.get('x-payment-response')).toBeNull()
    const settled = decodePaymentResponseHeader(signup.headers.get('payment-response') ?? '')
    expect(settled).toMatchObject({
      success: true,
      transaction: account.transaction,
      network: 'eip155:84532',
      payer: payer.address,
    })

    const refill = await pay(
      `${stack.url}/v1/x402/refill`,
      json({ amountUsdc: '20.000000' }, { authorization: `Bearer ${account.apiKey}` }),
    )
    expect(refill.status).toBe(200)
    expect(await refill.json()).toMatchObject({ amountUsdc: '20.000000', credited: true })
    expect(refill.headers.get('payment-response')).toBeTruthy()

    expect(await chain.balanceOf(payer.address)).toBe(27_000_000n)
    expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 23_000_000n)
    expect(await pendingOf(account.apiKey)).toBe('23.000000')
  })
})
