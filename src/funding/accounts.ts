// The funding side's use of accounts (src/accounts/): find or create the payer's account, and
// credit a settled payment to it.
import type { Address } from 'viem'
import type { AccountStore, CreatedAccount } from '../accounts/accounts.ts'
import { ApiError } from '../errors.ts'
import type { CreditResult } from './ledger.ts'
import type { Payments, PayOptions, SettledPayment } from './payments.ts'

/** The payer's account, created (with its first key, named `keyName`) when the wallet has none. */
export async function accountForPayer(
  accounts: AccountStore,
  payer: Address,
  maxPriceCents: number,
  keyName?: string,
): Promise<{ accountId: string; created: CreatedAccount | undefined }> {
  const existing = await accounts.findByWallet(payer)
  if (existing) return { accountId: existing.id, created: undefined }
  try {
    const created = await accounts.create(payer, maxPriceCents, keyName)
    return { accountId: created.account.id, created }
  } catch (error) {
    // Two signups of one wallet at once: the other created it; use that one.
    if (!(error instanceof ApiError && error.code === 'wallet_taken')) throw error
    const raced = await accounts.findByWallet(payer)
    if (!raced) throw error
    return { accountId: raced.id, created: undefined }
  }
}

/**
 * Credits a settled payment to the payer's account (signup, top-up), created when the wallet has
 * none. Money has moved by now: any failure here is the 409 `reconciling: false`.
 */
export async function creditPayer(
  payments: Payments,
  accounts: AccountStore,
  settled: SettledPayment,
  maxPriceCents: number,
  keyName?: string,
): Promise<{ accountId: string; created: CreatedAccount | undefined; credit: CreditResult }> {
  let account: Awaited<ReturnType<typeof accountForPayer>>
  try {
    account = await accountForPayer(accounts, settled.payer, maxPriceCents, keyName)
  } catch (error) {
    throw payments.creditFailed(settled, error)
  }
  return { ...account, credit: await payments.credit(settled, account.accountId) }
}

/**
 * A payment from any wallet, with no key (signup, top-up): settled behind the global fuse and
 * credited to the payer's account, created when the wallet has none.
 */
export async function payFromAnyWallet(
  payments: Payments,
  fuse: { take(): Promise<void> },
  accounts: AccountStore,
  payment: Pick<PayOptions, 'kind' | 'terms' | 'headers'> & { maxPriceCents: number; keyName?: string },
): Promise<Awaited<ReturnType<typeof creditPayer>> & { settled: SettledPayment }> {
  const settled = await payments.settle({
    kind: payment.kind,
    terms: payment.terms,
    headers: payment.headers,
    // No key to charge a refusal to: one global fuse on settlement calls.
    beforeSettle: () => fuse.take(),
    accountId: async (payer) => (await accounts.findByWallet(payer))?.id,
  })
  const account = await creditPayer(payments, accounts, settled, payment.maxPriceCents, payment.keyName)
  return { ...account, settled }
}
