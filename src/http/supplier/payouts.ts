// A supplier's payouts under /v1/supplier/payouts, behind its `sup_` key: ask for one (an
// Idempotency-Key header required; the same key again answers the same payout), list and read its
// own (another's is a 404). The operator's /admin/v1/payouts lists those in flight.
import { Elysia, t } from 'elysia'
import { badRequest } from '../../errors.ts'
import type { PayoutService } from '../../payouts/service.ts'
import { PAYOUT_ID, PAYOUT_STATES, type PayoutState } from '../../payouts/store.ts'
import { type AuthDeps, adminAuth } from '../auth.ts'
import { pageQuery } from '../paging.ts'
import { supplierAuth } from './auth.ts'

export function supplierPayoutRoutes(deps: AuthDeps & { payouts: PayoutService; adminToken: string }) {
  const { payouts } = deps
  return new Elysia({ name: 'svc/supplier-payouts', seed: deps.keys.prefix })
    .use(supplierAuth(deps))
    .use(adminAuth(deps.adminToken))
    .post(
      '/v1/supplier/payouts',
      async ({ supplier, body, request, status, set }) => {
        const key = request.headers.get('idempotency-key')
        const { payout, created } = await payouts.request(supplier.supplierId, body.amountUsdc, key)
        if (created) return status(201, payout)
        set.headers['idempotent-replayed'] = 'true'
        return payout
      },
      {
        supplier: true,
        body: t.Object(
          { amountUsdc: t.String({ minLength: 1, maxLength: 32 }) },
          { additionalProperties: false },
        ),
      },
    )
    .get(
      '/v1/supplier/payouts',
      ({ supplier, query }) => {
        const { limit, before } = pageQuery(query, PAYOUT_ID)
        return payouts.list(supplier.supplierId, limit, before)
      },
      { supplier: true },
    )
    .get('/v1/supplier/payouts/:id', ({ supplier, params }) => payouts.get(supplier.supplierId, params.id), {
      supplier: true,
      params: t.Object({ id: t.String({ maxLength: 64 }) }),
    })
    .get(
      '/admin/v1/payouts',
      ({ query }) => {
        const state = query.state
        if (state !== undefined && state !== 'sending' && state !== 'pending') {
          throw badRequest(
            `state must be one of the states in flight: sending, pending (of ${PAYOUT_STATES.join(', ')})`,
            'invalid_state',
          )
        }
        return payouts.inFlight(state as PayoutState | undefined)
      },
      { admin: true },
    )
}
