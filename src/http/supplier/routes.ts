// The supplier side of the market under /v1/supplier, and the operator's /admin/v1/suppliers and
// /admin/v1/payouts.
import { Elysia } from 'elysia'
import type { AppDeps } from '../../app.ts'
import { PayoutService } from '../../payouts/service.ts'
import { adminSupplierRoutes } from '../admin/suppliers.ts'
import { supplierIdentityRoutes } from './identity.ts'
import { supplierOfferRoutes } from './offers.ts'
import { supplierPayoutRoutes } from './payouts.ts'

export function supplierRoutes(deps: AppDeps) {
  return new Elysia({ name: 'svc/suppliers', seed: deps.keys.prefix })
    .use(
      supplierIdentityRoutes({
        ...deps,
        publicUrl: deps.config.publicUrl,
        noncesPerMinute: deps.config.siweNoncesPerMinute,
        noncesPerClientPerMinute: deps.config.siweNoncesPerClientPerMinute,
        recordRetentionMs: deps.config.records.recordRetentionDays * 86_400_000,
      }),
    )
    .use(
      supplierOfferRoutes({
        ...deps,
        masterKey: deps.config.masterKey,
        upstreamUrl: deps.config.upstreamUrl,
        keyChecksPerMinute: deps.config.supplierKeyChecksPerMinute,
        keyChecksPerMinuteTotal: deps.config.keyChecksPerMinuteTotal,
        minRoutable: deps.config.market.minRoutable,
      }),
    )
    .use(
      supplierPayoutRoutes({
        ...deps,
        payouts: deps.payouts ?? new PayoutService(deps.store, deps.keys, deps.config.payouts),
        adminToken: deps.config.adminToken,
      }),
    )
    .use(adminSupplierRoutes(deps))
}
