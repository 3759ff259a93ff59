// The contract errors of the supplier side, in one place: what each script refusal means to a client.
import { ApiError, NO_RETRY } from '../errors.ts'
import { MAX_ACTIVE_SUPPLIER_KEYS } from './supplier-keys.ts'

export const supplierKeyCap = () =>
  new ApiError(
    409,
    'api_key_limit',
    `this supplier already holds ${MAX_ACTIVE_SUPPLIER_KEYS} active keys; revoke one first`,
    { headers: NO_RETRY },
  )

export const supplierKeyNotFound = () => new ApiError(404, 'api_key_not_found', 'API key not found')

/** The calling key was revoked after its request was authenticated: answered as auth answers it. */
export const supplierKeyRevoked = () =>
  new ApiError(401, 'invalid_api_key', 'invalid supplier key', { headers: { 'www-authenticate': 'Bearer' } })

export const supplierNotFound = (id: string) =>
  new ApiError(404, 'supplier_not_found', `supplier '${id}' not found`)

export const nonceFuseBlown = (retryAfterSeconds: number) =>
  new ApiError(
    429,
    'nonce_rate_limited',
    'too many sign-in nonces were issued this minute; retry after Retry-After',
    {
      headers: { 'retry-after': String(retryAfterSeconds) },
    },
  )

export const clientNonceFuseBlown = (retryAfterSeconds: number) =>
  new ApiError(
    429,
    'nonce_rate_limited',
    'this client asked for too many sign-in nonces this minute; retry after Retry-After',
    { headers: { 'retry-after': String(retryAfterSeconds) } },
  )

export const keyCheckFuseBlown = (retryAfterSeconds: number) =>
  new ApiError(
    429,
    'key_check_rate_limited',
    'this supplier asked for too many upstream key checks this minute; retry after Retry-After',
    { headers: { 'retry-after': String(retryAfterSeconds) } },
  )

export const keyCheckCeilingReached = (retryAfterSeconds: number) =>
  new ApiError(
    429,
    'key_check_rate_limited',
    "the market's upstream key checks for this minute are spent; retry after Retry-After",
    { headers: { 'retry-after': String(retryAfterSeconds) } },
  )

export const nonceRefused = () =>
  new ApiError(401, 'siwe_nonce_invalid', 'the nonce is unknown, expired or already used; get a new one')

export const upstreamKeyRejected = () =>
  new ApiError(
    400,
    'upstream_key_rejected',
    'the upstream did not accept this API key (its balance could not be read)',
  )
