// The `supplier` macro: a `sup_` key as a Bearer token -> { supplierId, keyId }, by one HGETALL of
// the key's digest on every request (no cache: a revoke holds at once on every replica). A buyer's
// `svc_` key is not a supplier key (401), as a supplier key is not a buyer key on buyer routes.
import { Elysia } from 'elysia'
import { digestApiKey } from '../../accounts/api-keys.ts'
import { LastUsedThrottle } from '../../accounts/last-used.ts'
import { SupplierKeyStore } from '../../suppliers/key-store.ts'
import { looksLikeSupplierKey } from '../../suppliers/supplier-keys.ts'
import { type AuthDeps, bearerToken, callerMacro, refuseCookies, unauthorized } from '../auth.ts'

export interface SupplierCaller {
  supplierId: string
  keyId: string
}

const lastUsed = new LastUsedThrottle()
const callers = new WeakMap<Request, SupplierCaller>()

async function authenticate(
  store: SupplierKeyStore,
  deps: AuthDeps,
  request: Request,
): Promise<SupplierCaller> {
  const known = callers.get(request)
  if (known) return known
  refuseCookies(request)
  const token = bearerToken(request, 'supplier key')
  if (!looksLikeSupplierKey(token)) throw unauthorized('invalid_api_key', 'invalid supplier key')
  const digest = digestApiKey(token)
  const key = await store.resolve(digest)
  if (!key) throw unauthorized('invalid_api_key', 'invalid supplier key')
  if (lastUsed.shouldTouch(key.id, key.lastUsedAt)) {
    store.touch(digest).catch((error: Error) => {
      deps.logger.warn({ keyId: key.id, err: error.message }, 'could not record lastUsedAt')
    })
  }
  const caller = { supplierId: key.supplierId, keyId: key.id }
  callers.set(request, caller)
  return caller
}

/** Resolves a request's supplier key (once per request), or throws its 401. */
export function supplierAuthenticator(deps: AuthDeps): (request: Request) => Promise<SupplierCaller> {
  const store = new SupplierKeyStore(deps.store, deps.keys)
  return (request) => authenticate(store, deps, request)
}

/** `{ supplier: true }` on a route gives its handler `supplier: { supplierId, keyId }`. */
export function supplierAuth(deps: AuthDeps) {
  return new Elysia({ name: 'svc/supplier-auth', seed: deps.keys.prefix }).macro(
    'supplier',
    callerMacro('supplier', supplierAuthenticator(deps)),
  )
}
