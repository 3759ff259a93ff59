// A payer's side of x402 for tests that need the raw headers (replays, mismatches): read the 402,
// sign the EIP-3009 authorization with a viem local account, encode X-PAYMENT (v1).
import { randomBytes } from 'node:crypto'
import type { Hex, PrivateKeyAccount } from 'viem'
import { CHAIN_ID } from './chain.ts'
import type { TestStack } from './stack.ts'

export interface RequirementsV1 {
  scheme: string
  network: string
  maxAmountRequired: string
  payTo: Hex
  asset: Hex
  maxTimeoutSeconds: number
  extra: { name: string; version: string }
}

export const authorizationTypes = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const

/** The EIP-3009 authorization an X-PAYMENT header carries. */
export const authorizationOf = (header: string) =>
  JSON.parse(Buffer.from(header, 'base64').toString()).payload.authorization as {
    from: Hex
    to: Hex
    value: string
    validAfter: string
    validBefore: string
    nonce: Hex
  }

/** Signs the first `accepts` entry as `payer`; `override` bends a field for negative tests. */
export async function xPayment(
  payer: PrivateKeyAccount,
  requirements: RequirementsV1,
  override: Partial<{
    value: string
    to: Hex
    validAfter: string
    validBefore: string
    /** The EIP-712 domain's: an authorization for another chain or token. */
    chainId: number
    verifyingContract: Hex
  }> = {},
): Promise<string> {
  const now = Math.floor(Date.now() / 1000)
  const authorization = {
    from: payer.address,
    to: override.to ?? requirements.payTo,
    value: override.value ?? requirements.maxAmountRequired,
    validAfter: override.validAfter ?? String(now - 600),
    validBefore: override.validBefore ?? String(now + requirements.maxTimeoutSeconds),
    nonce: `0x${randomBytes(32).toString('hex')}` as Hex,
  }
  const signature = await payer.signTypedData({
    domain: {
      name: requirements.extra.name,
      version: requirements.extra.version,
      chainId: override.chainId ?? CHAIN_ID,
      verifyingContract: override.verifyingContract ?? requirements.asset,
    },
    types: authorizationTypes,
    primaryType: 'TransferWithAuthorization',
    message: {
      ...authorization,
      value: BigInt(authorization.value),
      validAfter: BigInt(authorization.validAfter),
      validBefore: BigInt(authorization.validBefore),
    },
  })
  const payment = {
    x402Version: 1,
    scheme: 'exact',
    network: requirements.network,
    payload: { signature, authorization },
  }
  return Buffer.from(JSON.stringify(payment)).toString('base64')
}

/** POSTs JSON; returns the status, parsed body and headers. */
export async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  })
  const text = await response.text()
  let parsed: Record<string, unknown> = {}
  try {
    parsed = JSON.parse(text)
  } catch {}
  return { status: response.status, body: parsed, headers: response.headers }
}

/** The challenge's v1 requirements, from an unpaid call. */
export async function challenge(url: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await post(url, body, headers)
  if (response.status !== 402)
    throw new Error(`expected 402, got ${response.status}: ${JSON.stringify(response.body)}`)
  return (response.body.accepts as RequirementsV1[])[0] as RequirementsV1
}

/** Signs and pays in one go: the 402, then the paid retry. */
export async function pay(
  url: string,
  body: unknown,
  payer: PrivateKeyAccount,
  headers: Record<string, string> = {},
) {
  const requirements = await challenge(url, body, headers)
  const header = await xPayment(payer, requirements)
  return { header, response: await post(url, body, { ...headers, 'x-payment': header }) }
}

/**
 * Polls `probe` until `done` holds or `ms` pass; returns the last value for the caller to assert.
 * The default is a hang guard below a test's time limit, not an expected time: a busy machine
 * confirms and settles later.
 */
export async function waitFor<T>(
  probe: () => Promise<T>,
  done: (value: T) => boolean,
  ms = 20_000,
): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await probe()
    if (done(value) || Date.now() > deadline) return value
    await Bun.sleep(25)
  }
}

/** What a payer's account was funded, micro-USDC; null while it has no account. */
export async function fundedOf(stack: TestStack, payer: PrivateKeyAccount): Promise<bigint | null> {
  const accountId = await stack.store.hget(stack.keys.wallets, payer.address.toLowerCase())
  if (!accountId) return null
  return BigInt((await stack.store.hget(stack.keys.account(accountId), 'funded')) ?? '0')
}

/** The first payment in flight whose transfer was sent, with its id; undefined when none is. */
export async function sentClaim(stack: TestStack): Promise<Record<string, string> | undefined> {
  for (const id of await stack.store.zrange(stack.keys.paymentsInFlight, 0, -1)) {
    const claim = await stack.store.hgetall(stack.keys.authorization(id))
    if (claim.state === 'sent') return { ...claim, id }
  }
  return undefined
}
