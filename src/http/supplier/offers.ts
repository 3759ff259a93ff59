// A supplier's own offers under /v1/supplier/offers, behind its `sup_` key: post (the upstream key
// checked first, never shown again), list, read, change ask / capacity / status, delete. Another
// supplier's offer, or an operator's, is a 404.
import { Elysia, t } from 'elysia'
import { SupplierOfferService } from '../../suppliers/offers.ts'
import { capacity, offerChanges, offerFields, patchBody } from '../admin/offers.ts'
import type { AuthDeps } from '../auth.ts'
import { supplierAuth } from './auth.ts'

export function supplierOfferRoutes(
  deps: AuthDeps & {
    masterKey: Uint8Array
    upstreamUrl: string
    keyChecksPerMinute: number
    keyChecksPerMinuteTotal?: number
    /** The least capacity an offer may be posted with, micro-DIEM (SVC_MIN_ROUTABLE_MICRO_DIEM). */
    minRoutable?: number
  },
) {
  const offers = new SupplierOfferService(
    deps.store,
    deps.keys,
    deps.masterKey,
    deps.upstreamUrl,
    deps.keyChecksPerMinute,
    deps.keyChecksPerMinuteTotal,
  )
  const params = t.Object({ id: t.String({ maxLength: 64 }) })
  return new Elysia({ name: 'svc/supplier-offers', prefix: '/v1/supplier/offers', seed: deps.keys.prefix })
    .use(supplierAuth(deps))
    .post(
      '/',
      async ({ supplier, body, status }) => {
        const offer = await offers.post(supplier.supplierId, {
          upstreamApiKey: body.upstreamApiKey,
          askCents: body.askCents,
          capacity: capacity(body.capacityDiem, deps.minRoutable),
          maxInFlight: body.maxInFlight,
        })
        return status(201, offer)
      },
      {
        supplier: true,
        body: t.Object(
          {
            upstreamApiKey: offerFields.upstreamApiKey,
            askCents: offerFields.askCents,
            capacityDiem: offerFields.capacityDiem,
            maxInFlight: t.Optional(offerFields.maxInFlight),
          },
          { additionalProperties: false },
        ),
      },
    )
    .get(
      '/',
      async ({ supplier }) => ({ object: 'list' as const, data: await offers.list(supplier.supplierId) }),
      { supplier: true },
    )
    .get('/:id', ({ supplier, params }) => offers.get(supplier.supplierId, params.id), {
      supplier: true,
      params,
    })
    .patch(
      '/:id',
      ({ supplier, params, body }) =>
        offers.update(supplier.supplierId, params.id, {
          askCents: body.askCents,
          capacity:
            body.capacityDiem === undefined ? undefined : capacity(body.capacityDiem, deps.minRoutable),
          status: body.status,
        }),
      {
        supplier: true,
        params,
        body: patchBody(offerChanges),
      },
    )
    .delete(
      '/:id',
      async ({ supplier, params }) => {
        await offers.remove(supplier.supplierId, params.id)
        return { status: 'ok' as const }
      },
      { supplier: true, params },
    )
}
