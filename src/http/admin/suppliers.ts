// Operator routes for suppliers under /admin/v1/suppliers, behind the admin token: the list (each
// with wallet, status, offer count, earned, paid out, pending, payable), one supplier, and
// suspension (its offers leave the ladder at once; payouts read the same status).
import { Elysia, t } from 'elysia'
import type { Keyspace } from '../../redis/keys.ts'
import type { Store } from '../../redis/store.ts'
import { adminSupplierView, SupplierStore } from '../../suppliers/store.ts'
import { adminAuth } from '../auth.ts'

export function adminSupplierRoutes(deps: { store: Store; keys: Keyspace; config: { adminToken: string } }) {
  const suppliers = new SupplierStore(deps.store, deps.keys)
  const params = t.Object({ id: t.String({ maxLength: 64 }) })
  return new Elysia({ name: 'svc/admin-suppliers', prefix: '/admin/v1/suppliers', seed: deps.keys.prefix })
    .use(adminAuth(deps.config.adminToken))
    .get(
      '/',
      async () => ({ object: 'list' as const, data: (await suppliers.list()).map(adminSupplierView) }),
      {
        admin: true,
      },
    )
    .get('/:id', async ({ params }) => adminSupplierView(await suppliers.require(params.id)), {
      admin: true,
      params,
    })
    .patch(
      '/:id',
      async ({ params, body }) => adminSupplierView(await suppliers.setStatus(params.id, body.status)),
      {
        admin: true,
        params,
        body: t.Object(
          { status: t.Union([t.Literal('active'), t.Literal('suspended')]) },
          { additionalProperties: false },
        ),
      },
    )
}
