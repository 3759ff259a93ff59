// Supplier identity under /v1/supplier: a nonce and Sign-In with Ethereum (no key: they make the
// first one), then behind a `sup_` key the supplier's keys (the buyer key routes' shapes), its
// summary (GET /me: earned, paid out, pending, payable), its fills and its earnings per day.
import { Elysia, t } from 'elysia'
import { keyName } from '../../accounts/key-name.ts'
import { supplierEarnings } from '../../suppliers/earnings.ts'
import { listFills } from '../../suppliers/fills.ts'
import { SupplierKeyStore } from '../../suppliers/key-store.ts'
import { NONCE_TTL_MS, SignInService } from '../../suppliers/signin.ts'
import { SIWE_MESSAGE_MAX } from '../../suppliers/siwe.ts'
import { SupplierStore, supplierView } from '../../suppliers/store.ts'
import { MAX_ACTIVE_SUPPLIER_KEYS } from '../../suppliers/supplier-keys.ts'
import type { AuthDeps } from '../auth.ts'
import { jsonBody } from '../json-body.ts'
import { pageQuery, windowQuery } from '../paging.ts'
import { supplierAuth } from './auth.ts'

const iso = (ms: number) => new Date(ms).toISOString()

export function supplierIdentityRoutes(
  deps: AuthDeps & {
    publicUrl: string
    noncesPerMinute: number
    noncesPerClientPerMinute: number
    recordRetentionMs?: number
  },
) {
  const signIn = new SignInService(
    deps.store,
    deps.keys,
    deps.publicUrl,
    deps.noncesPerMinute,
    NONCE_TTL_MS,
    deps.noncesPerClientPerMinute,
  )
  const keys = new SupplierKeyStore(deps.store, deps.keys)
  const suppliers = new SupplierStore(deps.store, deps.keys)
  return new Elysia({ name: 'svc/supplier-identity', prefix: '/v1/supplier', seed: deps.keys.prefix })
    .use(supplierAuth(deps))
    .get('/nonce', async ({ request, server }) => {
      // The socket's address: no proxy header is trusted, so a client cannot pick its own count.
      const client = server?.requestIP(request)?.address ?? ''
      return { nonce: await signIn.nonce(client) }
    })
    .post(
      '/signin',
      async ({ body }) => {
        const result = await signIn.signIn(body.message, body.signature)
        // The one and only time this plaintext leaves the gateway.
        return {
          supplierId: result.supplierId,
          wallet: result.wallet,
          apiKey: result.apiKey,
          id: result.keyId,
          keyPrefix: result.keyPrefix,
          replacedKeyId: result.replacedKeyId,
        }
      },
      {
        parse: jsonBody,
        body: t.Object(
          {
            message: t.String({ minLength: 1, maxLength: SIWE_MESSAGE_MAX }),
            signature: t.String({ minLength: 1, maxLength: 1026 }),
          },
          { additionalProperties: false },
        ),
      },
    )
    .get('/me', async ({ supplier }) => supplierView(await suppliers.require(supplier.supplierId)), {
      supplier: true,
    })
    .get(
      '/earnings',
      ({ supplier, query }) =>
        supplierEarnings(
          deps.store,
          deps.keys,
          supplier.supplierId,
          windowQuery(query),
          deps.recordRetentionMs,
        ),
      { supplier: true },
    )
    .get(
      '/fills',
      ({ supplier, query }) => {
        const { limit, before } = pageQuery(query)
        return listFills(deps.store, deps.keys, supplier.supplierId, limit, before, deps.recordRetentionMs)
      },
      { supplier: true },
    )
    .get(
      '/keys',
      async ({ supplier }) => {
        const active = await keys.list(supplier.supplierId)
        return {
          activeApiKeys: active.map((key) => ({
            id: key.id,
            name: key.name,
            keyPrefix: key.prefix,
            createdAt: iso(key.createdAt),
            lastUsedAt: key.lastUsedAt === null ? null : iso(key.lastUsedAt),
          })),
          activeApiKeyCount: active.length,
          maxActiveApiKeys: MAX_ACTIVE_SUPPLIER_KEYS,
        }
      },
      { supplier: true },
    )
    .post(
      '/keys',
      async ({ supplier, body, status }) => {
        const key = await keys.mint(supplier.supplierId, body.name, supplier.keyId)
        return status(201, key)
      },
      {
        supplier: true,
        body: t.Object({ name: keyName }, { additionalProperties: false }),
      },
    )
    .delete(
      '/keys/:id',
      async ({ supplier, params }) => {
        await keys.revoke(supplier.supplierId, params.id, supplier.keyId)
        return { status: 'ok' as const }
      },
      { supplier: true, params: t.Object({ id: t.String({ maxLength: 64 }) }) },
    )
}
