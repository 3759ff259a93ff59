// Accounts for tests, made the way an operator makes them: through /admin/v1/accounts over HTTP.
import { expect } from 'bun:test'
import { randomBytes } from 'node:crypto'
import type { DestinationStream } from 'pino'
import { getAddress } from 'viem/utils'
import { digestApiKey } from '../../src/accounts/api-keys.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import type { TestStack } from './stack.ts'
import { until } from './wait.ts'

export interface TestAccount {
  accountId: string
  wallet: string
  apiKey: string
}

/** A fresh, checksummed EVM address nobody holds. */
export function randomWallet(): string {
  return getAddress(`0x${randomBytes(20).toString('hex')}`)
}

/** A payment settled on chain for `accountId`, as the funding watcher hands it to the ledger's credit. */
export function settledPayment(accountId: string, amount: number) {
  const tx = `0x${randomBytes(32).toString('hex')}`
  return {
    accountId,
    amount: amount as MicroUsdc,
    chainId: 84532,
    transaction: tx,
    authorizationId: `84532:usdc:payer:${tx}`,
    blockNumber: 100n,
    payer: randomWallet(),
  }
}

export function adminFetch(stack: TestStack, path: string, init: RequestInit & { json?: unknown } = {}) {
  const headers = new Headers(init.headers)
  if (!headers.has('authorization')) headers.set('authorization', `Bearer ${stack.config.adminToken}`)
  if (init.json !== undefined) headers.set('content-type', 'application/json')
  const body = init.json !== undefined ? JSON.stringify(init.json) : init.body
  return fetch(`${stack.url}${path}`, { ...init, headers, body })
}

export async function createAccount(stack: TestStack, wallet = randomWallet()): Promise<TestAccount> {
  const response = await adminFetch(stack, '/admin/v1/accounts', { method: 'POST', json: { wallet } })
  if (response.status !== 201) throw new Error(`create account: ${response.status} ${await response.text()}`)
  return (await response.json()) as TestAccount
}

/** A call with a Bearer key; `json` sets the body and its content type. */
export function keyFetch(
  stack: TestStack,
  apiKey: string | null,
  path: string,
  init: RequestInit & { json?: unknown } = {},
) {
  const headers = new Headers(init.headers)
  if (apiKey !== null) headers.set('authorization', `Bearer ${apiKey}`)
  if (init.json !== undefined) headers.set('content-type', 'application/json')
  const body = init.json !== undefined ? JSON.stringify(init.json) : init.body
  return fetch(`${stack.url}${path}`, { ...init, headers, body })
}

/** A pino destination that keeps every line, to search what the gateway logged. */
export function logCapture(): { stream: DestinationStream; lines: string[] } {
  const lines: string[] = []
  return { lines, stream: { write: (line: string) => void lines.push(line) } }
}

/**
 * Waits until the key's lastUsedAt is written (it is written after the response, unawaited), so a
 * snapshot taken now holds still for the next minute of requests.
 */
export async function waitForLastUsed(stack: TestStack, apiKey: string): Promise<void> {
  await keyFetch(stack, apiKey, '/v1/agent/me')
  await until(
    async () => (await stack.store.hget(stack.keys.apiKey(digestApiKey(apiKey)), 'lastUsedAt')) !== null,
    5,
  )
}

/** An API key as GET /v1/agent/keys lists it: its limit, reset and spending. */
export interface ListedKey {
  id: string
  name: string
  keyPrefix: string
  limitUsdc: string | null
  limitReset: 'daily' | 'weekly' | 'monthly' | null
  spentUsdc: string
  periodSpentUsdc: string | null
  limitResetsAt: string | null
  limitRemainingUsdc: string | null
}
export type MintedKey = ListedKey & { apiKey: string }

/** A key minted through POST /v1/agent/keys with `apiKey`, which must answer 201. */
export async function mintKey(
  stack: TestStack,
  apiKey: string,
  json: Record<string, unknown>,
): Promise<MintedKey> {
  const response = await keyFetch(stack, apiKey, '/v1/agent/keys', { method: 'POST', json })
  expect(response.status).toBe(201)
  return (await response.json()) as MintedKey
}

/** Key `id` as GET /v1/agent/keys lists it with `apiKey` (undefined once revoked). */
export async function listedKey(
  stack: TestStack,
  apiKey: string,
  id: string,
): Promise<ListedKey | undefined> {
  const list = (await (await keyFetch(stack, apiKey, '/v1/agent/keys')).json()) as {
    activeApiKeys: ListedKey[]
  }
  return list.activeApiKeys.find((k) => k.id === id)
}
