// Accounts and keys as they go out on the wire (admin API, agent API and CLI print the same):
// money as decimal strings with 6 fractional digits, times as ISO 8601. Never a key's plaintext.
import { formatMicros } from '../money/units.ts'
import type { Account, Balances, Credited } from './accounts.ts'
import type { ApiKeyRecord, KeySpending } from './key-store.ts'

const iso = (ms: number) => new Date(ms).toISOString()

export function balancesView(b: Balances) {
  return {
    confirmedUsdc: formatMicros(b.confirmed),
    pendingUsdc: formatMicros(b.pending),
    heldUsdc: formatMicros(b.held),
    spentUsdc: formatMicros(b.spent),
    fundedUsdc: formatMicros(b.funded),
    writtenOffUsdc: formatMicros(b.writtenOff),
  }
}

/** The operator's view: every balance and the key count. */
export function accountView(account: Account, activeApiKeyCount: number) {
  return {
    accountId: account.id,
    wallet: account.wallet,
    createdAt: iso(account.createdAt),
    maxPriceCents: account.maxPriceCents,
    balances: balancesView(account.balances),
    activeApiKeyCount,
  }
}

/** The buyer's own view (GET /v1/agent/me, the MCP tool agent_me): what it can spend and at what price. */
export function meView(account: Account, activeApiKeyCount: number, maxActiveApiKeys: number) {
  return {
    accountId: account.id,
    wallet: account.wallet,
    balances: {
      confirmedUsdc: formatMicros(account.balances.confirmed),
      pendingUsdc: formatMicros(account.balances.pending),
      heldUsdc: formatMicros(account.balances.held),
    },
    maxPriceCents: account.maxPriceCents,
    activeApiKeyCount,
    maxActiveApiKeys,
    createdAt: iso(account.createdAt),
  }
}

export function creditView(credited: Credited) {
  return {
    accountId: credited.accountId,
    creditedUsdc: formatMicros(credited.amount),
    auditId: credited.auditId,
    balances: balancesView(credited.balances),
  }
}

export function apiKeyView(key: ApiKeyRecord & KeySpending) {
  return {
    id: key.id,
    name: key.name,
    keyPrefix: key.prefix,
    createdAt: iso(key.createdAt),
    lastUsedAt: key.lastUsedAt === null ? null : iso(key.lastUsedAt),
    ...spendingView(key),
  }
}

/**
 * A key's limit and how often it resets, what it spent (ever, and in the current period of a
 * periodic limit, with when that period ends), and what its limit still lets new requests hold:
 * the limit less what it spent (in the period) and what its requests in flight hold (admission
 * counts both).
 */
export function spendingView(key: KeySpending) {
  const counted = key.reset === null ? key.spent : key.periodSpent
  return {
    limitUsdc: key.limit === null ? null : formatMicros(key.limit),
    limitReset: key.reset,
    spentUsdc: formatMicros(key.spent),
    periodSpentUsdc: key.reset === null ? null : formatMicros(key.periodSpent),
    limitResetsAt: key.resetsAt === null ? null : iso(key.resetsAt),
    limitRemainingUsdc: key.limit === null ? null : formatMicros(Math.max(0, key.limit - counted - key.held)),
  }
}
