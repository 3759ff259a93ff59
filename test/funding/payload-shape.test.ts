// Payment headers a payer bent: user input, so a 4xx in the contract's shape and nothing left in
// Redis, never a 5xx. A v2 payload carrying a permit2Authorization beside the EIP-3009 one: what is
// verified must be what is settled, not another scheme's payload. A bad version, amount, validity
// window, network or signature, a contract as payer. One authorization signed twice (low and high
// s) is still one authorization: it moves money once.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { snapshotKeys, type TestStack } from '../helpers/stack.ts'
import { challenge, post, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let chainStack: ChainStack
beforeAll(async () => {
  chainStack = await startChainStack({ confirmations: 2, env: { SVC_X402_WATCH_INTERVAL_MS: '600000' } })
  ;({ chain, stack } = chainStack)
}, 30_000)
afterAll(() => chainStack.stop())

test('a v2 payload with a stray permit2Authorization is a 4xx; nothing changes', async () => {
  const payer = await chain.newPayer(10_000_000n)
  const url = `${stack.url}/v1/x402/signup`
  const requirements = await challenge(url, { amountUsdc: '5.000000' })
  const v1 = JSON.parse(Buffer.from(await xPayment(payer, requirements), 'base64').toString())
  const accepted = {
    scheme: 'exact',
    network: 'eip155:84532',
    asset: requirements.asset,
    payTo: requirements.payTo,
    amount: requirements.maxAmountRequired,
    maxTimeoutSeconds: requirements.maxTimeoutSeconds,
    extra: requirements.extra,
  }
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  for (const permit2Authorization of [null, {}, { permitted: {} }]) {
    const header = Buffer.from(
      JSON.stringify({ x402Version: 2, accepted, payload: { ...v1.payload, permit2Authorization } }),
    ).toString('base64')
    const response = await post(url, { amountUsdc: '5.000000' }, { 'payment-signature': header })
    expect(response.status).toBeGreaterThanOrEqual(400)
    expect(response.status).toBeLessThan(500)
  }
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  expect(await chain.balanceOf(payer.address)).toBe(10_000_000n)

  // The same authorization, sent as plain EIP-3009, still pays.
  const clean = Buffer.from(JSON.stringify({ x402Version: 2, accepted, payload: v1.payload })).toString(
    'base64',
  )
  const paid = await post(url, { amountUsdc: '5.000000' }, { 'payment-signature': clean })
  expect(paid.status).toBe(201)
})

test('a payment header bent in any field is a 402 in the x402 shape; nothing changes, nothing moves', async () => {
  const payer = await chain.newPayer(10_000_000n)
  const url = `${stack.url}/v1/x402/signup`
  const body = { amountUsdc: '5.000000' }
  const requirements = await challenge(url, body)
  const decode = (header: string) => JSON.parse(Buffer.from(header, 'base64').toString())
  const good = decode(await xPayment(payer, requirements))
  const withAuthorization = (fields: Record<string, unknown>) => ({
    ...good,
    payload: { ...good.payload, authorization: { ...good.payload.authorization, ...fields } },
  })
  const withSignature = (signature: string) => ({ ...good, payload: { ...good.payload, signature } })
  const now = Math.floor(Date.now() / 1000)
  const bent: Record<string, unknown> = {
    'no x402Version': { ...good, x402Version: undefined },
    'x402Version 3': { ...good, x402Version: 3 },
    'x402Version "1"': { ...good, x402Version: '1' },
    'value 5e6': withAuthorization({ value: '5e6' }),
    'value negative': withAuthorization({ value: '-5000000' }),
    'value with a leading zero': withAuthorization({ value: '05000000' }),
    'value a number': withAuthorization({ value: 5_000_000 }),
    'value one micro short': decode(await xPayment(payer, requirements, { value: '4999999' })),
    'value one micro over': decode(await xPayment(payer, requirements, { value: '5000001' })),
    'validAfter in the future': decode(
      await xPayment(payer, requirements, { validAfter: String(now + 3600) }),
    ),
    'another network': { ...good, network: 'base' },
    'signed for another chain id': decode(await xPayment(payer, requirements, { chainId: 8453 })),
    'signed for another token': decode(
      await xPayment(payer, requirements, { verifyingContract: chain.payTo }),
    ),
    'validBefore passed': decode(await xPayment(payer, requirements, { validBefore: String(now - 1) })),
    'a signature of odd length': withSignature(`${good.payload.signature}a`),
    'a signature of zeros': withSignature(`0x${'00'.repeat(65)}`),
    'a contract as payer': withAuthorization({ from: chain.usdc }),
  }
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  for (const [what, payment] of Object.entries(bent)) {
    const header = Buffer.from(JSON.stringify(payment)).toString('base64')
    const response = await post(url, body, { 'x-payment': header })
    expect({ what, status: response.status }).toEqual({ what, status: 402 })
    expect(response.body).toMatchObject({ x402Version: 1, error: expect.any(String) })
    expect(response.body.accepts).toHaveLength(1)
  }
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  expect(await chain.balanceOf(payer.address)).toBe(10_000_000n)
})

test("an authorization's two signatures (low and high s) settle once: the second is already credited", async () => {
  const payer = await chain.newPayer(10_000_000n)
  const url = `${stack.url}/v1/x402/signup`
  const body = { amountUsdc: '5.000000' }
  const payment = JSON.parse(
    Buffer.from(await xPayment(payer, await challenge(url, body)), 'base64').toString(),
  )
  const signature = payment.payload.signature as string
  const s = BigInt(`0x${signature.slice(66, 130)}`)
  const v = Number.parseInt(signature.slice(130), 16)
  const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n
  const twin = `${signature.slice(0, 66)}${(n - s).toString(16).padStart(64, '0')}${(v === 27 ? 28 : 27).toString(16)}`
  const answers = []
  for (const copy of [signature, twin]) {
    const header = Buffer.from(
      JSON.stringify({ ...payment, payload: { ...payment.payload, signature: copy } }),
    ).toString('base64')
    answers.push(await post(url, body, { 'x-payment': header }))
  }
  expect(answers[0]!.status).toBe(201)
  expect(answers[1]!.status).toBe(409)
  expect(answers[1]!.body.error).toMatchObject({ code: 'payment_already_credited', credited: true })
  expect(await chain.balanceOf(payer.address)).toBe(5_000_000n)
})
