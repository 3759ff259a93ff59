// The funding side's use of accounts (src/accounts/): find or create the payer's account.
import type { Address } from 'viem'
import type { AccountStore, CreatedAccount } from '../accounts/accounts.ts'
import { ApiError } from '../http/errors.ts'

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
