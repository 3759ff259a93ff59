// The result codes of the account scripts (lua/create-account, mint-key, revoke-key, credit) and
// the contract error each one becomes. One table, so a code means the same thing everywhere.
import { ApiError, badRequest, NO_RETRY } from '../errors.ts'
import { formatMicros } from '../money/units.ts'
import { AccountCode } from '../redis/result-codes.ts'
import { MAX_ACTIVE_API_KEYS } from './api-keys.ts'

export function accountResultError(code: number): ApiError {
  switch (code) {
    case AccountCode.NoAccount:
      return new ApiError(404, 'account_not_found', 'account not found')
    case AccountCode.KeyCap:
      return new ApiError(
        409,
        'api_key_limit',
        `this account already holds ${MAX_ACTIVE_API_KEYS} active API keys; revoke one first (nothing was paid)`,
        { headers: NO_RETRY },
      )
    case AccountCode.WalletTaken:
      return new ApiError(409, 'wallet_taken', 'an account already exists for this wallet', {
        headers: NO_RETRY,
      })
    case AccountCode.NoKey:
      return new ApiError(404, 'api_key_not_found', 'API key not found')
    case AccountCode.KeyLimitBinding:
      return new ApiError(
        403,
        'key_limit_binding',
        "this key has a spending limit: it may lower the limits of limited keys and mint keys with a limit within what it has left whose periods each hold whole periods of its own (a weekly key mints no monthly one); it may not raise or remove a limit, change a limit's limitReset, nor change or revoke a key without one, nor the account's max price or webhook endpoints (nothing changed)",
        { headers: NO_RETRY },
      )
    case AccountCode.IdempotencyKeyReused:
      return new ApiError(
        409,
        'idempotency_key_reused',
        'this Idempotency-Key was used for a credit of another amount (nothing credited)',
        { headers: NO_RETRY },
      )
    case AccountCode.CallerRevoked:
      // As auth answers a revoked key: the revoke came first, so nothing was done for it.
      return new ApiError(401, 'invalid_api_key', 'invalid API key', {
        headers: { 'www-authenticate': 'Bearer' },
      })
    case AccountCode.ResetWithoutLimit:
      return badRequest('limitReset needs a limit: send limitUsdc with it (nothing changed)')
    case AccountCode.BadAmount:
      return new ApiError(400, 'invalid_amount', 'amount is not a positive amount within the limit')
    default:
      // IdTaken survives a retry with fresh random ids; anything else is a script bug.
      return new ApiError(500, 'internal_error', 'internal error; safe to retry')
  }
}

/** set-key-limit's refusal: the key already spent and holds more than the limit asked for. */
export function limitBelowSpent(used: number): ApiError {
  return new ApiError(
    409,
    'key_limit_below_spent',
    `this key has spent and holds ${formatMicros(used)} USDC; set a limit of at least that (nothing changed)`,
    { extra: { minimumLimitUsdc: formatMicros(used) }, headers: NO_RETRY },
  )
}
