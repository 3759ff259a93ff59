// The result codes of the account scripts (lua/create-account, mint-key, revoke-key, credit) and
// the contract error each one becomes. One table, so a code means the same thing everywhere.
import { ApiError } from '../http/errors.ts'
import { MAX_ACTIVE_API_KEYS } from './api-keys.ts'

export enum AccountResult {
  Ok = 1,
  NoAccount = -1,
  KeyCap = -2,
  WalletTaken = -3,
  IdTaken = -4,
  NoKey = -5,
  BadAmount = -6,
}

export function accountResultError(code: number): ApiError {
  switch (code) {
    case AccountResult.NoAccount:
      return new ApiError(404, 'account_not_found', 'account not found')
    case AccountResult.KeyCap:
      return new ApiError(
        409,
        'api_key_limit',
        `this account already holds ${MAX_ACTIVE_API_KEYS} active API keys; revoke one first (nothing was paid)`,
      )
    case AccountResult.WalletTaken:
      return new ApiError(409, 'wallet_taken', 'an account already exists for this wallet')
    case AccountResult.NoKey:
      return new ApiError(404, 'api_key_not_found', 'API key not found')
    case AccountResult.BadAmount:
      return new ApiError(400, 'invalid_amount', 'amount is not a positive amount within the limit')
    default:
      // IdTaken survives a retry with fresh random ids; anything else is a script bug.
      return new ApiError(500, 'internal_error', 'internal error; safe to retry')
  }
}
