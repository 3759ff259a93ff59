// A funded buyer and offers on the simulated supplier, made through the operator API over HTTP.
import { randomUUID } from 'node:crypto'
import { adminFetch, createAccount, type TestAccount } from './accounts.ts'
import type { TestStack } from './stack.ts'

export async function fundedBuyer(stack: TestStack, usdc = '10.000000'): Promise<TestAccount> {
  const account = await createAccount(stack)
  const credited = await adminFetch(stack, `/admin/v1/accounts/${account.accountId}/credit`, {
    method: 'POST',
    json: { amountUsdc: usdc, note: 'test funding' },
  })
  if (credited.status !== 200) throw new Error(`credit: ${credited.status} ${await credited.text()}`)
  return account
}

export interface SimOffer {
  id: string
  upstreamKey: string
}

/** An offer selling capacity on the stack's simulated supplier, under its own upstream key. */
export function simOffer(
  stack: TestStack,
  askCents: number,
  extra: { capacityDiem?: string; maxInFlight?: number; upstreamKey?: string } = {},
): Promise<SimOffer> {
  return postOffer(stack, stack.sim.url, askCents, extra)
}

/** An offer selling capacity on the supplier at `baseUrl` (a test's own, or the simulated one). */
export async function postOffer(
  stack: TestStack,
  baseUrl: string,
  askCents: number,
  extra: { capacityDiem?: string; maxInFlight?: number; upstreamKey?: string } = {},
): Promise<SimOffer> {
  const upstreamKey = extra.upstreamKey ?? `sim-${randomUUID()}`
  const response = await adminFetch(stack, '/admin/v1/offers', {
    method: 'POST',
    json: {
      upstreamBaseUrl: baseUrl,
      upstreamApiKey: upstreamKey,
      askCents,
      capacityDiem: extra.capacityDiem ?? '50',
      ...(extra.maxInFlight ? { maxInFlight: extra.maxInFlight } : {}),
    },
  })
  if (response.status !== 201) throw new Error(`offer: ${response.status} ${await response.text()}`)
  return { id: ((await response.json()) as { id: string }).id, upstreamKey }
}

/** Sets a fault (and optionally a balance) on one upstream key of the simulated supplier. */
export async function simKey(
  stack: TestStack,
  key: string,
  state: { fault?: string | null; times?: number; balanceDiem?: string },
) {
  const response = await fetch(`${stack.sim.url}/sim/keys/${encodeURIComponent(key)}`, {
    method: 'PUT',
    body: JSON.stringify(state),
  })
  if (response.status !== 200) throw new Error(`sim key: ${response.status}`)
  return response.json() as Promise<{ balanceDiem: string; requests: number; cancelledStreams: number }>
}

export async function simKeyState(stack: TestStack, key: string) {
  return (await (await fetch(`${stack.sim.url}/sim/keys/${encodeURIComponent(key)}`)).json()) as {
    balanceDiem: string
    requests: number
    cancelledStreams: number
  }
}

/** The account's balances as the operator sees them (micro-USDC integers, from Redis). */
export async function balances(stack: TestStack, accountId: string) {
  const raw = await stack.store.hgetall(stack.keys.account(accountId))
  return {
    confirmed: Number(raw.confirmed),
    held: Number(raw.held),
    spent: Number(raw.spent),
  }
}

/** Parses an SSE body into its data payloads ([DONE] stays a string). */
export function sseData(text: string): (Record<string, unknown> | string)[] {
  return text
    .split('\n\n')
    .map((frame) => frame.split('\n').find((line) => line.startsWith('data: ')))
    .filter((line): line is string => line !== undefined)
    .map((line) => line.slice(6))
    .map((data) => (data === '[DONE]' ? data : (JSON.parse(data) as Record<string, unknown>)))
}

/**
 * The exact cost of a usage at the simulated llama-3.3-70b prices (0.70 / 2.80 per million) and an
 * ask: the upstream's bill is one sum of prompt x input and completion x output, rounded up once.
 */
export function expectedCost(
  usage: { prompt_tokens: number; completion_tokens: number },
  askCents: number,
  prices = { input: 700_000, output: 2_800_000 },
) {
  const micro =
    BigInt(usage.prompt_tokens) * BigInt(prices.input) +
    BigInt(usage.completion_tokens) * BigInt(prices.output)
  const burn = Number((micro + 999_999n) / 1_000_000n)
  return Math.ceil((burn * askCents) / 100)
}
