// Funding end to end over real HTTP, a real Redis and a real chain (anvil): the 402 challenge,
// signup, refill, the payer check, replays, concurrency, the key cap, pending -> confirmed.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ApiKeyStore } from '../../src/accounts/key-store.ts'
import { loadGatewayConfig } from '../../src/config.ts'
import { paymentRequirements, publicReason } from '../../src/funding/wire.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import { type TestChain, USDC_NAME, USDC_VERSION } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { snapshotKeys, type TestStack } from '../helpers/stack.ts'
import { challenge, pay, post, waitFor, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let chainStack: ChainStack
beforeAll(async () => {
  chainStack = await startChainStack({ confirmations: 2, env: { SVC_X402_WATCH_INTERVAL_MS: '50' } })
  ;({ chain, stack } = chainStack)
  // Compiling the token and starting anvil can pass bun's 5 s hook default on a busy machine.
}, 30_000)
afterAll(() => chainStack.stop())

const baseEnv = () => ({
  REDIS_URL: stack.config.redisUrl,
  SVC_ADMIN_TOKEN: stack.config.adminToken,
  SVC_MASTER_KEY: Buffer.from(stack.config.masterKey).toString('hex'),
  SVC_UPSTREAM_URL: stack.config.upstreamUrl,
  ...chain.env(2),
})
const signupUrl = () => `${stack.url}/v1/x402/signup`
const refillUrl = () => `${stack.url}/v1/x402/refill`
const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

async function me(key: string) {
  const response = await fetch(`${stack.url}/v1/agent/me`, { headers: bearer(key) })
  return (await response.json()) as {
    accountId: string
    wallet: string
    balances: { confirmedUsdc: string; pendingUsdc: string; heldUsdc: string }
  }
}

describe('the 402 challenge', () => {
  test('an unpaid signup gets x402 v1 in the body and v2 in PAYMENT-REQUIRED', async () => {
    const response = await post(signupUrl(), { amountUsdc: '5.000000' })
    expect(response.status).toBe(402)
    expect(response.body.x402Version).toBe(1)
    expect(typeof response.body.error).toBe('string')
    expect(response.body.accepts).toEqual([
      {
        scheme: 'exact',
        network: 'base-sepolia',
        maxAmountRequired: '5000000',
        resource: signupUrl(),
        description: expect.any(String),
        mimeType: 'application/json',
        payTo: chain.payTo,
        maxTimeoutSeconds: 300,
        asset: chain.usdc,
        extra: { name: USDC_NAME, version: USDC_VERSION },
      },
    ])
    const v2 = JSON.parse(Buffer.from(response.headers.get('payment-required') ?? '', 'base64').toString())
    expect(v2.x402Version).toBe(2)
    expect(v2.accepts[0]).toMatchObject({
      network: 'eip155:84532',
      amount: '5000000',
      asset: chain.usdc,
      payTo: chain.payTo,
    })
  })

  test('bad amounts are 400 and change nothing', async () => {
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    for (const amountUsdc of ['0.999999', '1000.000001', '1.0000001', '-5', '5e2', '', ' 5']) {
      const response = await post(signupUrl(), { amountUsdc })
      expect(response.status).toBe(400)
      expect((response.body.error as { code: string }).code).toBe('invalid_amount')
    }
    expect((await post(signupUrl(), { amountUsdc: 5 })).status).toBe(400)
    expect((await post(signupUrl(), {})).status).toBe(400)
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })

  test('a payment for the wrong amount or recipient is refused with a fresh challenge, no money moved', async () => {
    const payer = await chain.newPayer(10_000_000n)
    const requirements = await challenge(signupUrl(), { amountUsdc: '5.000000' })
    for (const override of [{ value: '4000000' }, { to: payer.address }]) {
      const header = await xPayment(payer, requirements, override)
      const response = await post(signupUrl(), { amountUsdc: '5.000000' }, { 'x-payment': header })
      expect(response.status).toBe(402)
      expect(response.body.accepts).toHaveLength(1)
    }
    expect(await chain.balanceOf(payer.address)).toBe(10_000_000n)
  })
  test('an authorization valid past maxTimeoutSeconds, or already expired, is a fresh 402; nothing moves', async () => {
    const payer = await chain.newPayer(10_000_000n)
    const requirements = await challenge(signupUrl(), { amountUsdc: '5.000000' })
    const now = Math.floor(Date.now() / 1000)
    const redisBefore = await snapshotKeys(stack.store, stack.keys.prefix)
    const cases = [
      { validBefore: String(now + 10 * 365 * 86_400), reason: 'at most maxTimeoutSeconds (300)' },
      { validBefore: String(now - 1), reason: 'validBefore has passed' },
    ]
    for (const { validBefore, reason } of cases) {
      const header = await xPayment(payer, requirements, { validBefore })
      const response = await post(signupUrl(), { amountUsdc: '5.000000' }, { 'x-payment': header })
      expect(response.status).toBe(402)
      expect(response.body.accepts).toHaveLength(1)
      expect(String(response.body.error)).toContain(reason)
    }
    expect(await chain.balanceOf(payer.address)).toBe(10_000_000n)
    // Refused before the claim: no key appeared (the watcher may only empty the unconfirmed set).
    const added = Object.keys(await snapshotKeys(stack.store, stack.keys.prefix)).filter(
      (key) => !(key in redisBefore),
    )
    expect(added).toEqual([])
  })
})

test("a refusal's reason names no URL of the operator's and quotes no signed transaction", () => {
  const raw = `0x02f8${'ab'.repeat(150)}`
  const reason = publicReason(
    `facilitator settle failed: HTTP request failed. URL: https://user:pw@rpc.example.com/v2/key123 Request body: {"params":["${raw}"]}`,
  )
  expect(reason).not.toContain('rpc.example.com')
  expect(reason).not.toContain('key123')
  expect(reason).not.toContain(raw.slice(0, 90))
  expect(reason).toStartWith('facilitator settle failed: HTTP request failed. URL: https://[redacted]')
  expect(publicReason('x'.repeat(1000)).length).toBeLessThanOrEqual(300)
})

describe('SVC_X402_MAX_TIMEOUT_SECONDS', () => {
  test('is validated like every other variable and is the maxTimeoutSeconds the terms carry', () => {
    for (const value of ['0', '29', '86401', '5m']) {
      expect(() => loadGatewayConfig({ ...baseEnv(), SVC_X402_MAX_TIMEOUT_SECONDS: value })).toThrow(
        'SVC_X402_MAX_TIMEOUT_SECONDS must be an integer from 30 to 86400',
      )
    }
    const config = loadGatewayConfig({ ...baseEnv(), SVC_X402_MAX_TIMEOUT_SECONDS: '90' }).funding!
    expect(config.maxTimeoutSeconds).toBe(90)
    const terms = { amount: 1_000_000 as MicroUsdc, resource: 'http://x/', description: 'd' }
    expect(paymentRequirements(config, terms).v1.maxTimeoutSeconds).toBe(90)
  })
})

describe('signup and refill', () => {
  test('signup creates the account and its key, credits pending, then confirmed after N blocks', async () => {
    const payer = await chain.newPayer(50_000_000n)
    const payToBefore = await chain.balanceOf(chain.payTo)
    const { response } = await pay(signupUrl(), { amountUsdc: '5.000000', name: 'laptop' }, payer)
    expect(response.status).toBe(201)
    // Plain values, not matchers: bun 1.4.5's toMatchObject writes its matchers into the object it
    // checks, which would turn the later comparisons against these fields into pattern matches.
    const { accountId, transaction } = response.body as { accountId: string; transaction: string }
    expect(accountId).toMatch(/^acct_[0-9a-f]{24}$/)
    expect(transaction).toMatch(/^0x[0-9a-f]{64}$/)
    expect(response.body.name).toBe('laptop')
    const apiKey = response.body.apiKey as string
    expect(apiKey.startsWith('svc_')).toBe(true)
    expect(response.body.keyPrefix).toBe(apiKey.slice(0, 12))
    const settlement = JSON.parse(
      Buffer.from(response.headers.get('x-payment-response') ?? '', 'base64').toString(),
    )
    expect(settlement).toMatchObject({
      success: true,
      transaction,
      network: 'base-sepolia',
      payer: payer.address,
    })
    expect(await chain.balanceOf(payer.address)).toBe(45_000_000n)
    expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 5_000_000n)

    const pending = await me(apiKey)
    expect(pending.wallet).toBe(payer.address)
    expect(pending.balances).toEqual({
      confirmedUsdc: '0.000000',
      pendingUsdc: '5.000000',
      heldUsdc: '0.000000',
    })
    await chain.testClient.mine({ blocks: 2 })
    const confirmed = await waitFor(
      () => me(apiKey),
      (m) => m.balances.confirmedUsdc === '5.000000',
    )
    expect(confirmed.balances).toEqual({
      confirmedUsdc: '5.000000',
      pendingUsdc: '0.000000',
      heldUsdc: '0.000000',
    })

    // A second signup from the same wallet uses the same account and mints a named key.
    const again = await pay(signupUrl(), { amountUsdc: '1.000000', name: 'phone' }, payer)
    expect(again.response.status).toBe(201)
    expect(again.response.body).toMatchObject({ accountId, name: 'phone' })
    const listed = await fetch(`${stack.url}/v1/agent/keys`, { headers: bearer(apiKey) })
    const names = ((await listed.json()) as { activeApiKeys: { name: string }[] }).activeApiKeys.map(
      (k) => k.name,
    )
    expect(names.sort()).toEqual(['laptop', 'phone'])
  })

  test('refill credits the account; a replayed X-PAYMENT is credited once and gets no accepts', async () => {
    const payer = await chain.newPayer(100_000_000n)
    const { response: signup } = await pay(signupUrl(), { amountUsdc: '2.000000' }, payer)
    const key = signup.body.apiKey as string
    const { header, response } = await pay(refillUrl(), { amountUsdc: '20.000000' }, payer, bearer(key))
    expect(response.status).toBe(200)
    expect(response.body).toMatchObject({
      accountId: signup.body.accountId,
      amountUsdc: '20.000000',
      credited: true,
    })
    // Credited once: pending now, confirmed once two blocks pass (other tests mine blocks too).
    const credited = async () => {
      const { pendingUsdc, confirmedUsdc } = (await me(key)).balances as Record<string, string>
      return Number(pendingUsdc!.replace('.', '')) + Number(confirmedUsdc!.replace('.', ''))
    }
    expect(await credited()).toBe(22_000_000)

    const replay = await post(
      refillUrl(),
      { amountUsdc: '20.000000' },
      { ...bearer(key), 'x-payment': header },
    )
    expect(replay.status).toBe(409)
    expect(replay.body.accepts).toBeUndefined()
    expect(replay.body.error).toMatchObject({
      code: 'payment_already_credited',
      credited: true,
      transaction: response.body.transaction,
    })
    // Replayed at signup, too: still once.
    const replayed = await post(signupUrl(), { amountUsdc: '20.000000' }, { 'x-payment': header })
    expect(replayed.status).toBe(409)
    expect(await chain.balanceOf(payer.address)).toBe(78_000_000n)
    expect(await credited()).toBe(22_000_000)
  })

  test('refill from another wallet is 403 before anything moves, on chain or in Redis', async () => {
    const owner = await chain.newPayer(10_000_000n)
    const { response: signup } = await pay(signupUrl(), { amountUsdc: '1.000000' }, owner)
    const key = signup.body.apiKey as string
    const stranger = await chain.newPayer(50_000_000n)
    const requirements = await challenge(refillUrl(), { amountUsdc: '10.000000' }, bearer(key))
    const header = await xPayment(stranger, requirements)
    const redisBefore = await snapshotKeys(stack.store, stack.keys.prefix)
    const payToBefore = await chain.balanceOf(chain.payTo)
    const response = await post(
      refillUrl(),
      { amountUsdc: '10.000000' },
      { ...bearer(key), 'x-payment': header },
    )
    expect(response.status).toBe(403)
    expect(response.body.error).toMatchObject({ code: 'payer_mismatch' })
    expect(await chain.balanceOf(stranger.address)).toBe(50_000_000n)
    expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore)
    const redisAfter = await snapshotKeys(stack.store, stack.keys.prefix)
    // No key appeared (no claim, no credit). The watcher may confirm earlier payments meanwhile,
    // which changes no funded total and may empty (so delete) the unconfirmed set; nothing else goes.
    const [before, after] = [Object.keys(redisBefore), Object.keys(redisAfter)]
    expect(after.filter((key) => !before.includes(key))).toEqual([])
    const gone = before.filter((key) => !after.includes(key))
    expect(gone.filter((key) => key !== stack.keys.paymentsUnconfirmed)).toEqual([])
    const account = stack.keys.account(signup.body.accountId as string)
    expect(await stack.store.hget(account, 'funded')).toBe('1000000')
  })

  test('a refill without a key is 401', async () => {
    expect((await post(refillUrl(), { amountUsdc: '5.000000' })).status).toBe(401)
  })

  test('20 concurrent signups from 20 wallets: 20 accounts, each credited once', async () => {
    const payers = []
    for (let i = 0; i < 20; i++) payers.push(await chain.newPayer(5_000_000n))
    const payToBefore = await chain.balanceOf(chain.payTo)
    const results = await Promise.all(
      payers.map((payer) => pay(signupUrl(), { amountUsdc: '3.000000' }, payer)),
    )
    expect(results.map((r) => r.response.status)).toEqual(Array(20).fill(201))
    expect(new Set(results.map((r) => r.response.body.accountId)).size).toBe(20)
    expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 60_000_000n)
    for (const { response } of results) {
      const { balances } = await me(response.body.apiKey as string)
      expect(Number(balances.pendingUsdc) + Number(balances.confirmedUsdc)).toBe(3)
    }
  })

  test('at the ten-key cap, signup credits the payment and answers 409 credited: true', async () => {
    const payer = await chain.newPayer(20_000_000n)
    const { response } = await pay(signupUrl(), { amountUsdc: '1.000000' }, payer)
    const accountId = response.body.accountId as string
    const apiKeys = new ApiKeyStore(stack.store, stack.keys)
    for (let i = 0; i < 9; i++) await apiKeys.mint(accountId, `k${i}`)
    const capped = await pay(signupUrl(), { amountUsdc: '4.000000' }, payer)
    expect(capped.response.status).toBe(409)
    expect(capped.response.body.accepts).toBeUndefined()
    expect(capped.response.body.error).toMatchObject({
      code: 'api_key_limit',
      credited: true,
      transaction: expect.any(String),
    })
    // Credited in full: 1 + 4 USDC funded (the watcher may already have confirmed the first part).
    expect(await stack.store.hget(stack.keys.account(accountId), 'funded')).toBe('5000000')
  })
})
