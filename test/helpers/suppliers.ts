// Suppliers for tests, made the way a supplier makes itself: a nonce, an EIP-4361 message signed
// by a viem local account, POST /v1/supplier/signin over HTTP.
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts'
import { createSiweMessage } from 'viem/siwe'
import { digestApiKey } from '../../src/accounts/api-keys.ts'
import { keyFetch } from './accounts.ts'
import type { TestStack } from './stack.ts'
import { until } from './wait.ts'

export interface TestSupplier {
  supplierId: string
  wallet: string
  apiKey: string
  account: PrivateKeyAccount
}

export async function supplierNonce(stack: TestStack): Promise<string> {
  const response = await fetch(`${stack.url}/v1/supplier/nonce`)
  if (response.status !== 200) throw new Error(`nonce: ${response.status}`)
  return ((await response.json()) as { nonce: string }).nonce
}

/** An EIP-4361 message for the stack's public URL; `over` changes any field. */
export function siweMessage(
  stack: TestStack,
  account: PrivateKeyAccount,
  nonce: string,
  over: Partial<Parameters<typeof createSiweMessage>[0]> = {},
): string {
  const own = new URL(stack.config.publicUrl)
  return createSiweMessage({
    domain: own.host,
    uri: `${own.origin}/supplier`,
    address: account.address,
    chainId: 84532,
    nonce,
    version: '1',
    statement: 'Sign in to sell capacity.',
    issuedAt: new Date(),
    expirationTime: new Date(Date.now() + 5 * 60_000),
    ...over,
  })
}

export function postSignIn(stack: TestStack, body: unknown) {
  return keyFetch(stack, null, '/v1/supplier/signin', { method: 'POST', json: body })
}

export async function signInSupplier(
  stack: TestStack,
  account: PrivateKeyAccount = privateKeyToAccount(generatePrivateKey()),
): Promise<TestSupplier> {
  const message = siweMessage(stack, account, await supplierNonce(stack))
  const signature = await account.signMessage({ message })
  const response = await postSignIn(stack, { message, signature })
  if (response.status !== 200) throw new Error(`signin: ${response.status} ${await response.text()}`)
  const body = (await response.json()) as { supplierId: string; wallet: string; apiKey: string; id: string }
  await waitForFirstUse(stack, body.apiKey)
  return { ...body, account }
}

/**
 * Uses the key once and waits until its lastUsedAt is written (after the response, unawaited), so
 * a snapshot taken now holds still for the next minute of its requests.
 */
async function waitForFirstUse(stack: TestStack, apiKey: string): Promise<void> {
  await keyFetch(stack, apiKey, '/v1/supplier/me')
  const digest = digestApiKey(apiKey)
  await until(async () => (await stack.store.hexists(stack.keys.supplierKey(digest), 'lastUsedAt')) === 1, 5)
}
