// Who is calling. `buyer`: a `svc_` key as a Bearer token (or as `x-api-key`, the header Anthropic's
// clients send) -> { accountId, keyId }, by one HGETALL
// of the key's digest, on every request (no in-process cache, so a revoke holds on every replica
// at once). Session cookies are refused outright, even beside a good key. `admin`: the operator
// token as a Bearer token, compared in constant time.
//
// Both macros authenticate in the parse phase, ahead of reading the body: a caller without
// credentials gets its 401 before any body is parsed or validated. The body is then parsed as
// JSON (json-body.ts) by the same parse chain, so the order is fixed in one place.
import { createHash, timingSafeEqual } from 'node:crypto'
import { Elysia } from 'elysia'
import type { Logger } from 'pino'
import { digestApiKey, looksLikeApiKey } from '../accounts/api-keys.ts'
import { ApiKeyStore } from '../accounts/key-store.ts'
import { LastUsedThrottle } from '../accounts/last-used.ts'
import { ApiError } from '../errors.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { jsonBody } from './json-body.ts'

export interface Caller {
  accountId: string
  keyId: string
}

export interface AuthDeps {
  store: Store
  keys: Keyspace
  logger: Logger
}

export const unauthorized = (code: string, message: string) =>
  new ApiError(401, code, message, { headers: { 'www-authenticate': 'Bearer' } })

// One throttle per process: lastUsedAt is written at most once a minute per key by this replica.
const lastUsed = new LastUsedThrottle()
// The caller found in the parse phase, for the resolve phase of the same request.
const callers = new WeakMap<Request, Caller>()

/** The Bearer token, or a 401 that names what is wrong (never echoing the token). */
export function bearerToken(request: Request, what: string): string {
  const header = request.headers.get('authorization')
  if (!header) throw unauthorized('missing_api_key', `send Authorization: Bearer <${what}>`)
  const match = /^Bearer[ ]+(\S+)[ ]*$/i.exec(header)
  if (!match) throw unauthorized('invalid_api_key', `Authorization must be: Bearer <${what}>`)
  return match[1]!
}

/**
 * A buyer's key: the Bearer token, or the `x-api-key` header Anthropic's clients send. Both at once
 * must be the same key: which one was meant cannot be guessed.
 */
function presentedKey(request: Request): string {
  const apiKey = request.headers.get('x-api-key')?.trim()
  if (!apiKey && !request.headers.has('authorization')) {
    throw unauthorized('missing_api_key', 'send Authorization: Bearer <API key> or x-api-key: <API key>')
  }
  if (!apiKey) return bearerToken(request, 'API key')
  if (request.headers.has('authorization') && bearerToken(request, 'API key') !== apiKey) {
    throw unauthorized('invalid_api_key', 'Authorization and x-api-key name different keys; send one')
  }
  return apiKey
}

/** The digest of a well-formed buyer key, or the 401 that says what is wrong (no Redis read). */
export function presentedKeyDigest(request: Request): string {
  refuseCookies(request)
  const token = presentedKey(request)
  if (!looksLikeApiKey(token)) throw unauthorized('invalid_api_key', 'invalid API key')
  return digestApiKey(token)
}

/** A Cookie header is refused outright, even beside a good key: keys travel in headers of their own. */
export function refuseCookies(request: Request): void {
  if (request.headers.has('cookie')) {
    throw unauthorized(
      'cookies_not_accepted',
      'session cookies are not accepted here; send only Authorization: Bearer <API key>',
    )
  }
}

async function authenticateBuyer(store: ApiKeyStore, logger: Logger, request: Request): Promise<Caller> {
  const known = callers.get(request)
  if (known) return known
  const digest = presentedKeyDigest(request)
  const key = await store.resolve(digest)
  if (!key) throw unauthorized('invalid_api_key', 'invalid API key')
  if (lastUsed.shouldTouch(key.id, key.lastUsedAt)) {
    // Not awaited: bookkeeping must not slow or fail the request.
    store.touch(digest).catch((error: Error) => {
      logger.warn({ keyId: key.id, err: error.message }, 'could not record lastUsedAt')
    })
  }
  const caller = { accountId: key.accountId, keyId: key.id }
  callers.set(request, caller)
  return caller
}

/** Resolves a request's buyer key (once per request), or throws its 401. */
export function buyerAuthenticator(deps: AuthDeps): (request: Request) => Promise<Caller> {
  const store = new ApiKeyStore(deps.store, deps.keys)
  return (request) => authenticateBuyer(store, deps.logger, request)
}

/**
 * A macro's phases for a caller found from its key: authenticated before the body is read (a 401
 * costs no body), then handed to the handler as `name` (the authenticator answers once per request).
 */
export function callerMacro<N extends string, C>(name: N, authenticate: (request: Request) => Promise<C>) {
  return {
    parse: [
      async ({ request }: { request: Request }) => {
        await authenticate(request)
      },
      jsonBody,
    ],
    // Ahead of validation: a request without a body (GET) is not parsed, and its params and query
    // must not be judged for a caller who may not use the route (401 first, not a 400).
    transform: async ({ request }: { request: Request }) => {
      await authenticate(request)
    },
    resolve: async ({ request }: { request: Request }) =>
      ({ [name]: await authenticate(request) }) as Record<N, C>,
  }
}

/** The `buyer` macro: `{ buyer: true }` on a route gives its handler `buyer: { accountId, keyId }`. */
export function buyerAuth(deps: AuthDeps) {
  return new Elysia({ name: 'svc/buyer-auth', seed: deps.keys.prefix }).macro(
    'buyer',
    callerMacro('buyer', buyerAuthenticator(deps)),
  )
}

// The digest found in the parse phase, for the resolve phase of the same request.
const digests = new WeakMap<Request, string>()

/**
 * The `buyerKey` macro, for the paid routes: the key is checked for form here (cookie, Bearer,
 * `svc_` shape: 401 before the body is read) and resolved by the admission script itself, in the
 * same Redis call that admits the request; an unknown or revoked key is a 401 from there. The
 * handler gets `buyerKey: { apiKeyDigest }`.
 */
export function buyerKeyAuth(deps: { keys: Keyspace }) {
  return new Elysia({ name: 'svc/buyer-key', seed: deps.keys.prefix }).macro('buyerKey', {
    parse: [
      ({ request }) => {
        digests.set(request, presentedKeyDigest(request))
      },
      jsonBody,
    ],
    resolve: ({ request }) => ({
      buyerKey: { apiKeyDigest: digests.get(request) ?? presentedKeyDigest(request) },
    }),
  })
}

const sha256 = (text: string) => createHash('sha256').update(text).digest()

/** The `admin` macro: `{ admin: true }` on a route requires the operator token. */
export function adminAuth(adminToken: string) {
  const expected = sha256(adminToken)
  // Digests of equal length, compared in constant time: neither the token nor its length leaks.
  const check = (request: Request) => {
    const token = bearerToken(request, 'admin token')
    if (!timingSafeEqual(sha256(token), expected))
      throw unauthorized('invalid_admin_token', 'invalid admin token')
  }
  return new Elysia({ name: 'svc/admin-auth', seed: expected.toString('hex') }).macro('admin', {
    parse: [
      ({ request }) => {
        check(request)
      },
      jsonBody,
    ],
    // Ahead of validation, for requests that are not parsed (GET): 401 before any 400.
    transform: ({ request }) => {
      check(request)
    },
    beforeHandle: ({ request }) => {
      check(request)
    },
  })
}
